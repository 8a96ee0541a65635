"""``kope browser``: serve the Experience Graph guide, style and lineage page for Neo4j Browser."""

from __future__ import annotations

import click

from kope.cli._common import State, err, out, pass_state
from kope.cli.memory import namespace_option


@click.command("browser")
@namespace_option
@click.option("--port", default=0, type=click.IntRange(0, 65535), help="Port on 127.0.0.1 (default: any free port).")
@pass_state
def command(state: State, port: int) -> None:
    """Serve the KOPE Browser guide, style and lineage page on 127.0.0.1 and print how to open them."""
    import signal
    import time

    from kope.db.client import GraphClient
    from kope.memory.browser import GuideServer, style_file
    from kope.memory.lineage import load_lineages
    from kope.memory.lineage_page import render_page

    config = state.config
    namespace = config.memory.namespace
    client = GraphClient.from_config(config)

    def lineage() -> str:
        client.verify()  # fails fast while Neo4j is down (the page then says so), instead of retrying reads
        return render_page(namespace, load_lineages(client, namespace), generated_at=time.time())

    try:
        server = GuideServer(namespace, port, lineage=lineage)
    except OSError as exc:
        from kope.errors import PortInUseError

        client.close()
        raise PortInUseError(
            f"cannot serve the guide on 127.0.0.1:{port}: {exc.strerror}",
            hint="choose another port with --port, or 0 for any free port",
        ) from None
    # Ctrl-C and SIGTERM both stop it, also when started in the background (where a shell ignores SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    out.print(f"Neo4j Browser:  {config.browser_url}")
    if config.uses_local_server:
        out.print(f"  connect to {config.neo4j_uri} as {config.neo4j.user}, password in {config.password_file}")
    else:
        out.print(f"  connect to {config.neo4j_uri} as {config.neo4j.user}")
    out.print(f"In Browser, run (namespace {namespace}):")
    out.print(f"  :play {server.guide_url}")
    out.print(f"  :style {server.style_url}")
    out.print(f"(or drag {style_file()} onto the Browser window)")
    out.print(f"Lineage page:   {server.lineage_url}")
    out.print("Serving until Ctrl-C.", highlight=False)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        err.print("stopped")
    finally:
        server.httpd.server_close()
        client.close()
