"""coopconsumer's reliability campaign: decoder fuzzing, a chaos runner with an ownership
ledger, and a soak run. Not part of the installed library; see reliability/README.md."""
