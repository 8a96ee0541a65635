"""``kope serve``: the shared memory server (REST for KOPE's client, MCP for any agent).

    agent (kope optimize / any MCP agent) --HTTP(S) + bearer key--> kope serve --Bolt--> Neo4j
                                      \\--journal (local, first)

Modules:

- ``registry``   teams, namespaces with their owner and read ACL, keys (argon2 hashes only) and
                 the audit log, in one SQLite file next to the server (why SQLite: docs/server.md);
- ``auth``       bearer tokens: format, verification (argon2, cached per process), identities;
- ``acl``        what an identity may do in a namespace (the server decides, never the client);
- ``guards``     ASGI middleware: request size limit (413), authentication (401), per-key rate
                 limits (429 + Retry-After), metrics and audit of every request;
- ``store``      the memory operations, confined to one authorised namespace, stamping every
                 write with the key's team, key id, harness version and time;
- ``api``        the REST routes (``/v1/...``); ``mcp_tools`` the MCP tools at ``/mcp``;
- ``app``        ``create_app``: everything wired together; ``runner`` starts uvicorn.
"""
