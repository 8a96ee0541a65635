"""The generated Neo4j password never starts with '-' (neo4j-admin would take it for an option)."""

import secrets

from kope.config import load_config
from kope.db.local import LocalNeo4j


def test_a_generated_password_starting_with_a_dash_is_drawn_again(tmp_path, monkeypatch):
    drawn = iter(["-looks-like-an-option", "_fine-one"])
    monkeypatch.setattr(secrets, "token_urlsafe", lambda n: next(drawn))
    server = LocalNeo4j(load_config({"data_dir": str(tmp_path)}, environ={}))
    assert server._initial_password() == "_fine-one"
    assert server.config.neo4j_password() == "_fine-one"  # what was written to the password file
