"""The refusals before a sweep starts, in two stages, each run once per distinct
configuration: the rules the composed configuration alone decides (:mod:`.config`), then
what this machine allows it (:mod:`.host`: a GPU, an environment, the engine, a model's
probe); :mod:`.preflight` runs both on one configuration.  Around them: the devices each
framework of a sweep trains on (:mod:`.device`), the cells this machine cannot run at all
(:mod:`.availability`), the models that are not the zoo's (:mod:`.own_models`)."""
