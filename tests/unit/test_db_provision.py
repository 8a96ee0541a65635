"""LocalNeo4j.provision: servers started at once for several data dirs fetch the shared distribution once."""

from __future__ import annotations

import threading
import time

from kope.config import load_config
from kope.db.local import LocalNeo4j


def test_concurrent_starts_fetch_the_distribution_once(tmp_path, monkeypatch):
    fetched = []

    def fake_fetch(self):
        fetched.append(threading.current_thread().name)
        time.sleep(0.3)  # long enough for the other start to arrive while this one holds the lock
        self.lib_dir.mkdir(parents=True)
        (self.lib_dir / "neo4j-5.jar").write_text("jar")
        (self.dist_dir / ".complete").write_text("done")
        return self.lib_dir

    monkeypatch.setattr(LocalNeo4j, "_fetch", fake_fetch)
    servers = [
        LocalNeo4j(
            load_config({"data_dir": str(tmp_path / f"data-{k}"), "cache_dir": str(tmp_path / "cache")}, environ={})
        )
        for k in range(3)
    ]
    assert len({s.dist_dir for s in servers}) == 1
    results: list = []
    threads = [
        threading.Thread(target=lambda s=s: results.append(s.provision()), name=f"start-{k}")
        for k, s in enumerate(servers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(fetched) == 1, fetched
    assert results == [servers[0].lib_dir] * 3
