"""Typed configuration, read when asked for (never at import time).

Precedence, highest first:

1. explicit overrides passed by the caller (CLI options such as ``--data-dir``);
2. ``KOPE_*`` environment variables (the table in ``ENV_VARS``);
3. a ``kope.toml`` file: ``$KOPE_CONFIG`` if set (it must exist), else
   ``./kope.toml`` in the working directory, else ``<user config dir>/kope.toml``;
4. the defaults below.

String values in ``kope.toml`` may reference the environment as ``${NAME}``;
an unset reference is an error, not an empty string.

Secrets (Neo4j password, LLM API key, evaluation workers' key) are never printed: ``masked()`` replaces
them, and ``kope config show`` prints only the masked view.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kope.errors import ConfigError
from kope.teamweights import check_team_weights, parse_team_weights

APP = "kope"
SECRET_MASK = "********"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Neo4jSettings(_Section):
    """Where the Experience Graph lives. ``uri=None`` means the local KOPE server."""

    uri: str | None = None
    user: str = "neo4j"
    password: str | None = Field(default=None, repr=False)
    database: str = "neo4j"

    @field_validator("uri")
    @classmethod
    def _check_uri(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not re.match(r"^(bolt|neo4j)(\+s|\+ssc)?://", value):
            raise ValueError(f"must start with bolt://, neo4j://, bolt+s:// or neo4j+s:// (got {value!r})")
        return value


class ServerSettings(_Section):
    """The local Neo4j Community server that ``kope db start`` provisions."""

    version: str = "5.26.30"
    browser_version: str = "5.24.0"
    bolt_port: int = Field(default=7687, ge=1, le=65535)
    http_port: int = Field(default=7474, ge=1, le=65535)
    heap: str = "512m"
    pagecache: str = "256m"
    start_timeout: float = Field(default=120.0, gt=0)
    stop_timeout: float = Field(default=30.0, gt=0)

    @field_validator("heap", "pagecache")
    @classmethod
    def _check_size(cls, value: str) -> str:
        if not re.fullmatch(r"\d+[kmgKMG]?", value):
            raise ValueError(f"must be a size such as 512m or 1g (got {value!r})")
        return value.lower()


class LLMSettings(_Section):
    """An OpenAI-compatible endpoint (hosted API, vLLM, Ollama, ...)."""

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    timeout: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=5, ge=0)

    @property
    def configured(self) -> bool:
        return bool(self.model and (self.base_url or self.api_key))


class ContextSettings(_Section):
    """Token budget B_k = max(0, W - S - G - R) and the warm/cold caps (tokens)."""

    window: int = Field(default=32_000, gt=0)  # W: model context window
    system: int = Field(default=1_500, ge=0)  # S: system prompt allowance
    generation: int = Field(default=4_000, ge=0)  # G: room left for the answer
    recency: int = Field(default=1_000, ge=0)  # R: reserve for the latest feedback
    warm_cap: int = Field(default=6_000, ge=0)  # Q_w
    cold_cap: int = Field(default=2_000, ge=0)  # Q_c
    encoding_fallback: str = "cl100k_base"  # used when the model's own encoding is unknown or unavailable


class MemorySettings(_Section):
    """Experience-graph partitioning: namespace isolates memories, team tags provenance.

    ``url`` + ``token``: use a shared memory server (``kope serve``) instead of Bolt;
    the server then decides the team (the key's) and which namespaces may be read and written."""

    namespace: str = "default"
    team: str = "local"
    url: str | None = None
    token: str | None = Field(default=None, repr=False)
    # source team -> weight in [0, 1] of its attempts in retrieval ("*": every team not named; 0 leaves
    # a team out; your own team weighs 1 unless named): [memory] team_weights = {"cpu-b" = 0.5, "*" = 0.2}
    # or KOPE_TEAM_WEIGHTS="cpu-b=0.5,*=0.2" (kope.memory.ranking: source team)
    team_weights: dict[str, float] = Field(default_factory=dict)

    @field_validator("team_weights", mode="before")
    @classmethod
    def _parse_team_weights(cls, value: Any) -> Any:
        if isinstance(value, str):
            return dict(parse_team_weights(value))
        if isinstance(value, Mapping):
            return dict(check_team_weights(value))
        return value

    @field_validator("namespace", "team")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", value):
            raise ValueError(f"must be 1-64 letters, digits, '_', '.', '-' (got {value!r})")
        return value

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(f"must be an http:// or https:// URL of a `kope serve` server (got {value!r})")
        return value.rstrip("/")

    @property
    def remote(self) -> bool:
        """True when a memory server is configured (then Bolt is not used for memory)."""
        return self.url is not None


class EvaluatorSettings(_Section):
    """Where candidates are evaluated: ``local``, worker URLs (``http://HOST:PORT[,URL...]``), ``ray`` or ``ray://ADDRESS``."""

    backend: str = "local"
    key: str | None = Field(default=None, repr=False)  # the workers' bearer key (KOPE_WORKER_KEY)
    timeout: float = Field(default=3600.0, gt=0)  # seconds one remote evaluation may take, queueing included
    attempts: int = Field(
        default=3, ge=1, le=20
    )  # tries of one evaluation (on other workers) after infrastructure faults
    # measured time each implementation gets per case when timing a loop step (harness.timing.Budget.rep_ms);
    # lower is faster and noisier
    rep_ms: float = Field(default=100.0, gt=0, le=60_000)
    # the same for the bench's final evaluation of each pair's best kernel (`kope bench --final-rep-ms`)
    final_rep_ms: float = Field(default=300.0, gt=0, le=60_000)
    # warm-up per implementation and case before a loop step's measured units (harness.timing.Budget.warmup_ms)
    warmup_ms: float = Field(default=25.0, ge=0, le=60_000)
    # fewest measured units per case, in loop steps and final evaluations alike (harness.timing.Budget.min_reps);
    # the timing stops after these once rep_ms is spent or the medians' intervals are tight
    min_reps: int = Field(default=5, ge=1, le=100)
    # CPUs one cpu-target evaluation asks a Ray cluster for (default: as many as its smallest node has, so a
    # timed evaluation has a node to itself); GPU targets ask for one GPU (kope.evaluators.ray)
    ray_cpus: int | None = Field(default=None, ge=1, le=4096)

    @field_validator("backend")
    @classmethod
    def _check_backend(cls, value: str) -> str:
        from kope.errors import UsageError
        from kope.evaluators.spec import parse_evaluator

        try:
            return str(parse_evaluator(value))
        except UsageError as exc:
            raise ValueError(exc.message) from None


class KopeConfig(_Section):
    data_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_data_dir(APP)))
    cache_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_cache_dir(APP)))
    neo4j: Neo4jSettings = Field(default_factory=Neo4jSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    evaluator: EvaluatorSettings = Field(default_factory=EvaluatorSettings)
    source_file: Path | None = Field(default=None, exclude=True)

    # -- derived values -------------------------------------------------------------
    @property
    def uses_local_server(self) -> bool:
        """True when no external URI is configured: KOPE manages its own server."""
        return self.neo4j.uri is None

    @property
    def neo4j_uri(self) -> str:
        return self.neo4j.uri or f"bolt://127.0.0.1:{self.server.bolt_port}"

    @property
    def neo4j_home(self) -> Path:
        """Conf, data, logs and pid file of the local server."""
        return self.data_dir / "neo4j"

    @property
    def password_file(self) -> Path:
        return self.neo4j_home / "password"

    @property
    def browser_url(self) -> str:
        if self.uses_local_server:
            return f"http://127.0.0.1:{self.server.http_port}/browser/"
        return "(external server: open its own Browser URL)"

    def neo4j_password(self) -> str | None:
        """The configured password, else the one stored for the local server."""
        if self.neo4j.password:
            return self.neo4j.password
        try:
            return self.password_file.read_text(encoding="utf-8").strip() or None
        except FileNotFoundError:
            return None

    def masked(self) -> dict[str, Any]:
        """The effective configuration as plain data, secrets replaced by a mask."""
        data = self.model_dump(mode="json")
        for section, key in SECRETS:
            if data[section].get(key):
                data[section][key] = SECRET_MASK
        data["neo4j"]["effective_uri"] = self.neo4j_uri
        data["source_file"] = str(self.source_file) if self.source_file else None
        return data


SECRETS = (("neo4j", "password"), ("llm", "api_key"), ("memory", "token"), ("evaluator", "key"))

# Environment variable -> (section or None for top level, key)
ENV_VARS: dict[str, tuple[str | None, str]] = {
    "KOPE_DATA_DIR": (None, "data_dir"),
    "KOPE_CACHE_DIR": (None, "cache_dir"),
    "KOPE_NEO4J_URI": ("neo4j", "uri"),
    "KOPE_NEO4J_USER": ("neo4j", "user"),
    "KOPE_NEO4J_PASSWORD": ("neo4j", "password"),
    "KOPE_NEO4J_DATABASE": ("neo4j", "database"),
    "KOPE_NEO4J_VERSION": ("server", "version"),
    "KOPE_NEO4J_BROWSER_VERSION": ("server", "browser_version"),
    "KOPE_NEO4J_BOLT_PORT": ("server", "bolt_port"),
    "KOPE_NEO4J_HTTP_PORT": ("server", "http_port"),
    "KOPE_NEO4J_HEAP": ("server", "heap"),
    "KOPE_NEO4J_PAGECACHE": ("server", "pagecache"),
    "KOPE_NEO4J_START_TIMEOUT": ("server", "start_timeout"),
    "KOPE_LLM_BASE_URL": ("llm", "base_url"),
    "KOPE_LLM_MODEL": ("llm", "model"),
    "KOPE_LLM_API_KEY": ("llm", "api_key"),
    "KOPE_LLM_TIMEOUT": ("llm", "timeout"),
    "KOPE_LLM_MAX_RETRIES": ("llm", "max_retries"),
    "KOPE_CONTEXT_WINDOW": ("context", "window"),
    "KOPE_CONTEXT_SYSTEM": ("context", "system"),
    "KOPE_CONTEXT_GENERATION": ("context", "generation"),
    "KOPE_CONTEXT_RECENCY": ("context", "recency"),
    "KOPE_CONTEXT_WARM_CAP": ("context", "warm_cap"),
    "KOPE_CONTEXT_COLD_CAP": ("context", "cold_cap"),
    "KOPE_CONTEXT_ENCODING_FALLBACK": ("context", "encoding_fallback"),
    "KOPE_NAMESPACE": ("memory", "namespace"),
    "KOPE_TEAM": ("memory", "team"),
    "KOPE_TEAM_WEIGHTS": ("memory", "team_weights"),
    "KOPE_MEMORY_URL": ("memory", "url"),
    "KOPE_MEMORY_TOKEN": ("memory", "token"),
    "KOPE_EVALUATOR": ("evaluator", "backend"),
    "KOPE_WORKER_KEY": ("evaluator", "key"),
    "KOPE_EVALUATOR_TIMEOUT": ("evaluator", "timeout"),
    "KOPE_EVALUATOR_ATTEMPTS": ("evaluator", "attempts"),
    "KOPE_EVALUATOR_REP_MS": ("evaluator", "rep_ms"),
    "KOPE_EVALUATOR_FINAL_REP_MS": ("evaluator", "final_rep_ms"),
    "KOPE_EVALUATOR_WARMUP_MS": ("evaluator", "warmup_ms"),
    "KOPE_EVALUATOR_MIN_REPS": ("evaluator", "min_reps"),
    "KOPE_EVALUATOR_RAY_CPUS": ("evaluator", "ray_cpus"),
}

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand_env_refs(value: Any, where: str, environ: Mapping[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _expand_env_refs(v, f"{where}.{k}", environ) for k, v in value.items()}
    if isinstance(value, str):

        def repl(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in environ:
                raise ConfigError(f"{where} references ${{{name}}}, but the environment variable {name} is not set")
            return environ[name]

        return _ENV_REF.sub(repl, value)
    return value


def find_config_file(environ: Mapping[str, str], cwd: Path) -> Path | None:
    explicit = environ.get("KOPE_CONFIG")
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"KOPE_CONFIG points at {path}, which is not a file")
        return path
    for candidate in (cwd / "kope.toml", Path(platformdirs.user_config_dir(APP)) / "kope.toml"):
        if candidate.is_file():
            return candidate
    return None


def _read_toml(path: Path, environ: Mapping[str, str]) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    expanded: dict[str, Any] = _expand_env_refs(data, path.name, environ)
    return expanded


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _set(data: dict[str, Any], section: str | None, key: str, value: Any) -> None:
    if section is None:
        data[key] = value
    else:
        data.setdefault(section, {})[key] = value


def load_config(
    overrides: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> KopeConfig:
    """Build the effective configuration. ``overrides`` uses dotted keys, e.g.
    ``{"data_dir": "/tmp/x", "server.bolt_port": 7688}``; ``None`` values are ignored."""
    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else cwd
    source = find_config_file(environ, cwd)
    data: dict[str, Any] = _read_toml(source, environ) if source else {}

    from_env: dict[str, Any] = {}
    for name, (section, key) in ENV_VARS.items():
        if environ.get(name, "") != "":
            _set(from_env, section, key, environ[name])
    data = _merge(data, from_env)

    from_overrides: dict[str, Any] = {}
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        section, _, key = dotted.rpartition(".")
        _set(from_overrides, section or None, key, value)
    data = _merge(data, from_overrides)

    try:
        config = KopeConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "config"
        origin = f" (from {source})" if source else ""
        more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ConfigError(f"invalid configuration{origin}: {where}: {first['msg']}{more}") from None
    config.source_file = source
    config.data_dir = config.data_dir.expanduser()
    config.cache_dir = config.cache_dir.expanduser()
    return config
