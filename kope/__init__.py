"""KOPE: experience-driven kernel optimization with an Experience Graph in Neo4j."""

__version__ = "0.1.0"
