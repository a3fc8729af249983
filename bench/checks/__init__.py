"""The refusals before a sweep starts: each config checked alone (:mod:`.preflight`), what
this machine's devices allow (:mod:`.device`), and which configurations cannot run here
at all (:mod:`.availability`)."""
