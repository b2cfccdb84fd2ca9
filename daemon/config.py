"""Configuration: one TOML file, found by ``--config``, then ``$CAMBIUM_CONFIG``, then the
user config directory; with no file at all, the embedded defaults serve.

Relative paths resolve against the config file's directory (the data directory when there is
no file); ``~`` expands. A bad value is a :class:`ConfigError` naming the key and the rule.
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args, get_origin
from zoneinfo import ZoneInfo

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from daemon.config_file import CONFIG_ENV as CONFIG_ENV
from daemon.config_file import DEFAULT_TIMEZONE, daemon_socket, read_config_file, resolve_path
from daemon.config_file import ConfigError as ConfigError
from daemon.config_file import data_dir as data_dir
from daemon.config_file import find_config_file as find_config_file
from daemon.config_file import runtime_dir as runtime_dir
from daemon.core.errors import describe, field_errors
from daemon.core.signal import NAME_PATTERN
from daemon.core.time_zone import TimeZoneName

if TYPE_CHECKING:
    from rhythms.template import RhythmTemplate

_STORE_URL = re.compile(r"^(sqlite|postgresql)(\+[a-z0-9_]+)?://")
DIGEST = "seed_digest"  # the bundled weekly rhythm that ``seeds.digest`` turns off


def _scalar_types(annotation: Any) -> set[Any]:
    """The types a field's annotation names at its top (``int | None`` names int, None)."""
    members = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else ()
    return set(members or (annotation,))


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _booleans_are_not_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """TOML has real booleans and numbers: ``max_attempts = true`` is a mistake, not 1,
        and ``digest = 1`` is not true (pydantic alone would take both)."""
        accepted = _scalar_types(cls.model_fields[info.field_name or ""].annotation)
        if isinstance(value, bool) and bool not in accepted and accepted & {int, float}:
            raise ValueError("must be a number, not true or false")
        if bool in accepted and not isinstance(value, bool) and value is not None:
            raise ValueError("must be true or false")
        return value


class StoreConfig(_Section):
    url: str = ""

    @field_validator("url")
    @classmethod
    def _supported_database(cls, value: str) -> str:
        if not value:
            return value
        # A pattern, not SQLAlchemy's URL parser: importing config stays light for the CLI.
        if not _STORE_URL.match(value):
            raise ValueError("must be a sqlite:///PATH or postgresql+psycopg://USER@HOST/DB URL")
        return value


class IngressConfig(_Section):
    socket: Path = Path()
    tcp: str | None = None  # "127.0.0.1:8765": loopback only, and only with token_file
    token_file: Path | None = None
    max_request_bytes: int = Field(1024 * 1024, ge=1024)

    @field_validator("tcp")
    @classmethod
    def _loopback(cls, value: str | None) -> str | None:
        if value is None:
            return None
        host, _, port = value.rpartition(":")
        host = host.strip("[]")
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError("must be a loopback address and port, like 127.0.0.1:8765")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError("must end with a port number, like 127.0.0.1:8765")
        return value

    @model_validator(mode="after")
    def _tcp_needs_a_token(self) -> IngressConfig:
        if self.tcp is not None and self.token_file is None:
            raise ValueError("token_file is required when tcp is set (TCP always needs a token)")
        return self

    def read_token(self) -> str | None:
        """The bearer token for TCP, from ``token_file``: it must be private to the user (like
        an ssh key, a token others can read is refused) and at least 16 characters."""
        if self.token_file is None:
            return None
        path = self.token_file
        try:
            mode = path.stat().st_mode
            token = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"ingress.token_file: cannot read {path}: {exc.strerror}") from None
        if mode & 0o077:
            raise ConfigError(
                f"ingress.token_file: {path} is readable by other users (mode "
                f"{stat.S_IMODE(mode):04o}); run `chmod 600 {path}`"
            )
        if len(token) < 16:
            raise ConfigError("ingress.token_file: the token must be at least 16 characters")
        return token

    @property
    def tcp_address(self) -> tuple[str, int] | None:
        if self.tcp is None:
            return None
        host, _, port = self.tcp.rpartition(":")
        return host.strip("[]"), int(port)


class PathsConfig(_Section):
    substrate: list[Path] = []
    daily: Path = Path("memory/daily")
    compost: Path = Path("memory/compost")


class BusConfig(_Section):
    max_attempts: int = Field(5, ge=1, le=100)
    grace_period: float = Field(10.0, gt=0, le=600)
    # The receptors this daemon may own (None: all). On PostgreSQL, several daemons share a
    # store and each receptor goes to one of the daemons that may own it.
    receptors: list[str] | None = None
    # How long a fleet daemon's hold on a receptor lasts unless renewed (PostgreSQL).
    lease_seconds: float = Field(15.0, ge=2, le=600)


class ObservationConfig(_Section):
    reinforce_delta: float = Field(0.2, ge=0, le=1)
    # An observation (signal or extraction) whose words overlap an active or withered mark's
    # under the same subject at least this much (Jaccard, ignoring case, whitespace and
    # punctuation) reinforces that mark instead of making a near-copy.
    similarity: float = Field(0.9, gt=0, le=1)


class ConsolidationConfig(_Section):
    extractor: str = "mock"
    decay_days: float = Field(14, ge=0)


class LLMConfig(_Section):
    """An OpenAI-compatible chat-completions endpoint (consolidation, recall summaries).

    The API key is never written here: ``api_key_env`` names an environment variable, or
    ``api_key_file`` a file only its owner can read."""

    base_url: str = "http://127.0.0.1:8080/v1"  # llama.cpp's server; Ollama: :11434/v1
    model: str = ""
    api_key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    api_key_file: Path | None = None
    timeout: float = Field(120.0, gt=0, le=3600)
    max_lines_per_call: int = Field(200, ge=10, le=5000)
    overlap_lines: int = Field(5, ge=0, le=100)
    temperature: float = Field(0.0, ge=0, le=2)
    max_attempts: int = Field(3, ge=1, le=10)
    # An answer longer than this is given up (read in pieces, never held whole).
    max_answer_bytes: int = Field(4 * 1024 * 1024, ge=1024, le=1024**3)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL, like http://127.0.0.1:8080/v1")
        return value

    @model_validator(mode="after")
    def _one_key_source(self) -> LLMConfig:
        if self.api_key_env and self.api_key_file:
            raise ValueError("give api_key_env or api_key_file, not both")
        if self.overlap_lines * 2 > self.max_lines_per_call:
            raise ValueError("overlap_lines must be at most half of max_lines_per_call")
        return self


class SeedsConfig(_Section):
    wither_days: float = Field(30, gt=0, le=36_500)  # a pending seed this old withers
    undo_hours: float = Field(24, ge=0, le=8_760)  # a review can be undone this long
    digest: bool = True  # the weekly seed digest rhythm (Sunday 18:00)


class CompostConfig(_Section):
    templates: list[str] | None = None  # read only these template ids; None = all


class RhythmsConfig(_Section):
    templates: list[Path] = []


class RecallConfig(_Section):
    # Hybrid recall (the ``semantic`` extra): dense embeddings fused with the lexical
    # ranking for the daily, substrate and compost text. Off by default.
    semantic: bool = False
    embeddings: Path = Path("embeddings.sqlite")  # the embedding cache, beside the store
    model: Path | None = None  # a local ONNX sentence-embedding model; None: the packaged one
    tokenizer: Path | None = None  # its tokenizer.json; required with ``model``
    threads: int | None = Field(None, ge=1, le=64)  # for the model; None: one
    min_similarity: float = Field(0.3, ge=-1, le=1)  # dense hits below it are dropped
    # The background worker: texts embedded (and stored, in one transaction) per step, and
    # the memory one model call may hold at its peak (a batch of long texts is split).
    embed_batch: int = Field(64, ge=1, le=4096, strict=True)
    embed_memory_mb: int = Field(64, ge=16, le=4096, strict=True)

    @property
    def vectors(self) -> Path:
        """Where the memory-mapped copy of the stored vectors is kept (``<base>.i8``,
        ``.slots``, ``.json`` for the daily lines', ``<base>.marks.*`` for the marks'):
        beside the embedding cache."""
        return self.embeddings.with_suffix("")

    @model_validator(mode="after")
    def _model_with_tokenizer(self) -> RecallConfig:
        if (self.model is None) != (self.tokenizer is None):
            raise ValueError("model and tokenizer are given together (or neither)")
        return self


class LogConfig(_Section):
    level: Literal["debug", "info", "warning", "error"] = "info"


class Config(_Section):
    workspace: Annotated[str, Field(pattern=NAME_PATTERN, max_length=128)] = "default"
    timezone: TimeZoneName = DEFAULT_TIMEZONE
    store: StoreConfig = StoreConfig()
    ingress: IngressConfig = IngressConfig()
    paths: PathsConfig = PathsConfig()
    bus: BusConfig = BusConfig()
    observation: ObservationConfig = ObservationConfig()
    consolidation: ConsolidationConfig = ConsolidationConfig()
    llm: LLMConfig = LLMConfig()
    compost: CompostConfig = CompostConfig()
    seeds: SeedsConfig = SeedsConfig()
    rhythms: RhythmsConfig = RhythmsConfig()
    recall: RecallConfig = RecallConfig()
    log: LogConfig = LogConfig()
    source: Path | None = None  # the file this came from, if any

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def rhythm_templates(self) -> list[RhythmTemplate]:
        """The bundled rhythms and the configured templates, read and checked (names unique)."""
        from rhythms.template import RhythmTemplateError, bundled_templates, load_template

        try:
            bundled = [
                t for t in bundled_templates(self.timezone) if self.seeds.digest or t.name != DIGEST
            ]
            templates = bundled + [
                load_template(path, self.timezone) for path in self.rhythms.templates
            ]
        except RhythmTemplateError as exc:
            raise ConfigError(f"rhythms.templates: {exc}") from None
        names = [t.name for t in templates]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(f"rhythms.templates: rhythm names must be unique: {duplicates}")
        return templates

    @property
    def llm_configured(self) -> bool:
        """A model is named: recall summaries use it (and consolidation, if chosen)."""
        return bool(self.llm.model)

    @model_validator(mode="after")
    def _openai_needs_a_model(self) -> Config:
        if self.consolidation.extractor == "openai" and not self.llm.model:
            raise ValueError('llm.model is required when consolidation.extractor = "openai"')
        return self


def load_config(explicit: Path | None = None) -> Config:
    path = find_config_file(explicit)
    if path is None:
        return _resolve(Config(), base=data_dir(), source=None)
    raw = read_config_file(path)
    return parse_config(raw, source=path.expanduser().resolve())


def parse_config(raw: dict[str, Any], source: Path | None = None) -> Config:
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        where = f"{source}: " if source else ""
        errors = field_errors(exc.errors(), whole="")
        problems = describe(errors).replace("unknown field", "unknown key")
        raise ConfigError(where + problems) from None
    base = source.parent if source else data_dir()
    return _resolve(config, base=base, source=source)


def _resolve(config: Config, base: Path, source: Path | None) -> Config:
    """Absolute paths everywhere, and the platform defaults where nothing was given."""

    def absolute(path: Path) -> Path:
        return resolve_path(path, base)

    url = config.store.url or f"sqlite:///{data_dir() / 'cambium.db'}"
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        url = f"sqlite:///{absolute(Path(url.removeprefix('sqlite:///')))}"
    resolved = config.model_copy(
        update={
            "source": source,
            "store": StoreConfig(url=url),
            "ingress": config.ingress.model_copy(
                update={
                    "socket": daemon_socket(config.ingress.socket, base),
                    "token_file": absolute(config.ingress.token_file)
                    if config.ingress.token_file
                    else None,
                }
            ),
            "paths": PathsConfig(
                substrate=[absolute(p) for p in config.paths.substrate],
                daily=absolute(config.paths.daily),
                compost=absolute(config.paths.compost),
            ),
            "rhythms": RhythmsConfig(templates=[absolute(p) for p in config.rhythms.templates]),
            "llm": config.llm.model_copy(
                update={
                    "api_key_file": absolute(config.llm.api_key_file)
                    if config.llm.api_key_file
                    else None
                }
            ),
            "recall": config.recall.model_copy(
                update={
                    "embeddings": absolute(config.recall.embeddings),
                    "model": absolute(config.recall.model) if config.recall.model else None,
                    "tokenizer": absolute(config.recall.tokenizer)
                    if config.recall.tokenizer
                    else None,
                }
            ),
        }
    )
    _check_no_overlap(resolved.paths)
    return resolved


def _check_no_overlap(paths: PathsConfig) -> None:
    """The daemon writes the daily directory and must never write, move or delete a
    substrate file; the compost is read as agents' records, not the user's own files. So
    neither may be, contain or lie inside a substrate entry (compared after resolving
    symlinks, which could otherwise disguise the same directory)."""
    problems = []
    for key, directory in (("paths.daily", paths.daily), ("paths.compost", paths.compost)):
        mine = Path(os.path.realpath(directory))
        for index, entry in enumerate(paths.substrate):
            theirs = Path(os.path.realpath(entry))
            if mine == theirs or theirs.is_relative_to(mine) or mine.is_relative_to(theirs):
                problems.append(
                    f"{key} ({directory}) and paths.substrate[{index}] ({entry}) overlap: "
                    "the daily and compost directories must not be, contain or lie inside "
                    "a substrate entry"
                )
    if problems:
        raise ConfigError("; ".join(problems))
