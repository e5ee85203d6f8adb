"""The control plane: a P4Runtime daemon that loads the pipeline and reconciles intents onto switches."""
