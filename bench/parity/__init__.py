"""Training parity: proof that two frameworks (or a strategy and the undistributed run) do
the same training arithmetic.  ``python -m bench.parity``; :mod:`.check` compares,
:mod:`.side` runs one side, :mod:`.weights` moves weights between frameworks."""
