"""One Spark application per pipeline stage; each file is also importable (tests call `run`)."""
