"""What every other part of bench builds on, on both sides of a trial: the typed
configuration and its identity, result records, the zoo's registry, supported versions,
what a machine is, where bench's files are.  Imports nothing of bench outside this package
and no framework."""
