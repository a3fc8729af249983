"""Analysis of recorded results: the statistics of the comparison verdicts (:mod:`.stats`)
and a distributed trial's scaling efficiency (:mod:`.scaling`).  Reads what the store
holds; writes nothing and imports no framework."""
