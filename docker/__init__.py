"""Docker Compose file for users who have a Docker engine (see `kope db start --docker`)."""
