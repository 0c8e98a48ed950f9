"""Load a spec tree (SPEC §3) into validated models, or explain every problem at once.

Layout under the specs root::

    models/<id>.yaml        ModelSpec
    cli_agents/<id>.yaml    CliAgentSpec
    tests/<id>.yaml         TestSpec
    suites/<id>.yaml        SuiteSpec
    hardware_profiles.yaml  HardwareProfiles (optional)

``.yml`` is accepted too. :func:`load_specs` reads every file, validates it, checks cross references,
and raises one :class:`~gripprobe_core.errors.SpecError` listing every problem as
``file:line: key.path: message``; it raises nothing else for any file content.

Layers: :func:`load_specs` takes one root or several; later roots win by id (a spec replaces the one of
the same kind and id below it; hardware profiles by profile id). The commands load :func:`spec_layers`:
the specs shipped inside the package first, then each ``--specs`` folder (or ``$GRIPPROBE_SPECS``, or the
nearest ``specs/`` folder) on top. ``SpecSet.origin`` says which layer each id came from.

Each file's parse (its plain data and line map) is cached by the sha256 of its bytes (specs/cache.py):
a command parses only the files that changed; validation and the cross checks always run.
"""

from __future__ import annotations

import os

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from pydantic import BaseModel, ValidationError

from ..errors import SpecError, UserError
from ..models.specs import CliAgentSpec, HardwareProfiles, ModelSpec, SuiteSpec, TestSpec
from .crossref import KnownIds, check_references, check_test_plugins
from .error_map import issues_from_validation
from .issues import SpecIssue, display_path, make_issue
from .cache import ParseCache, content_key, enabled as _cache_enabled
from .yaml_source import ParsedFile, SourceMap, _read_bounded, read_yaml

#: kind name → (directory under the root, model). Kind names are the ``kind`` in ``SpecSet.files`` keys.
KIND_DIRS: dict[str, tuple[str, type[BaseModel]]] = {
    "model": ("models", ModelSpec),
    "cli_agent": ("cli_agents", CliAgentSpec),
    "test": ("tests", TestSpec),
    "suite": ("suites", SuiteSpec),
}
HARDWARE_KIND = "hardware_profiles"
HARDWARE_STEM = "hardware_profiles"
YAML_SUFFIXES = (".yaml", ".yml")
SPECS_ENV = "GRIPPROBE_SPECS"


@dataclass
class SpecSet:
    """Every spec under ``root``, validated and cross-checked.

    ``files`` maps ``(kind, id)`` to the file that defined it; kinds are ``model``, ``cli_agent``,
    ``test``, ``suite`` and ``hardware_profiles`` (one entry per profile id, all pointing at
    ``hardware_profiles.yaml``). ``sources`` holds the line map of each of those files.
    """

    root: Path
    """The top layer (where a user's own specs go)."""
    models: dict[str, ModelSpec] = field(default_factory=dict)
    agents: dict[str, CliAgentSpec] = field(default_factory=dict)
    tests: dict[str, TestSpec] = field(default_factory=dict)
    suites: dict[str, SuiteSpec] = field(default_factory=dict)
    hardware: HardwareProfiles = field(default_factory=HardwareProfiles)
    files: dict[tuple[str, str], Path] = field(default_factory=dict)
    sources: dict[tuple[str, str], SourceMap] = field(default_factory=dict, repr=False)
    notes: list[SpecIssue] = field(default_factory=list)
    """Problems that do not stop a run (an agent whose plugin is not installed), as ``file:line: key: message``."""
    layers: list[Path] = field(default_factory=list)
    """Every root loaded, bottom first (one for a single root)."""
    replaced: dict[tuple[str, str], Path] = field(default_factory=dict)
    """``(kind, id)`` → the file of a lower layer that a higher layer's spec of the same id replaced."""

    def origin(self, kind: str, spec_id: str) -> Path | None:
        """The layer (one of ``layers``) that the spec ``(kind, id)`` came from."""
        path = self.files.get((kind, spec_id))
        if path is None:
            return None
        for layer in reversed(self.layers):
            if _inside(path, layer):
                return layer
        return None

    def where(self, kind: str, spec_id: str, *key_path: Any) -> str:
        """``file:line`` of a spec (or of one of its keys), for messages that point at a spec."""
        source = self.sources.get((kind, spec_id))
        if source is None:
            path = self.files.get((kind, spec_id))
            return f"{display_path(path)}:1" if path else f"<{kind} {spec_id}>"
        return f"{display_path(source.path)}:{source.line(tuple(key_path))}"

    def tests_tagged(self, tag: str) -> list[TestSpec]:
        """Tests carrying ``tag``, sorted by id."""
        return [t for _, t in sorted(self.tests.items()) if tag in t.tags]

    def summary(self) -> str:
        """``2 models, 1 cli_agents, 19 tests, 1 suites, 1 hardware profiles``."""
        return (f"{len(self.models)} models, {len(self.agents)} cli_agents, {len(self.tests)} tests, "
                f"{len(self.suites)} suites, {len(self.hardware.profiles)} hardware profiles")

    def _store(self, kind: str, spec: Any) -> None:
        store = {"model": self.models, "cli_agent": self.agents, "test": self.tests, "suite": self.suites}[kind]
        store[spec.id] = spec


def spec_files(directory: Path) -> list[Path]:
    """The spec files of one kind directory, sorted; hidden files and other suffixes are ignored."""
    if not directory.is_dir():
        return []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []
    return sorted(p for p in entries
                  if p.suffix in YAML_SUFFIXES and not p.name.startswith(".") and p.is_file())


def load_specs(root: Path | Sequence[Path], *, registry: Any = None) -> SpecSet:
    """Load and validate the spec tree under ``root``, or the layered trees of a list of roots (later
    roots win by kind and id; an id defined twice *within* one root is still an error).

    ``registry`` (a :class:`gripprobe_core.pluginmanager.Registry`, or anything with ``validators``,
    ``challenges`` and ``agents`` mappings) enables the checks that validator kinds, challenge kinds
    and agent ``plugin`` names are installed. Raises :class:`UserError` if ``root`` is not a
    directory and :class:`SpecError` with every problem found otherwise.
    """
    roots = [Path(root)] if isinstance(root, (str, os.PathLike)) else [Path(r) for r in root]
    if not roots:
        raise UserError("no specs directory given; pass --specs DIR")
    for r in roots:
        if not r.is_dir():
            raise UserError(f"specs directory {display_path(r)} does not exist; pass --specs/--root DIR "
                            f"(or set {SPECS_ENV}) to point at your specs")
    specs = SpecSet(root=roots[-1], layers=roots)
    known = KnownIds()
    issues: list[SpecIssue] = []
    cache = ParseCache() if _cache_enabled() else None
    for layer in roots:
        layer_known = KnownIds()
        for kind, (dirname, model) in KIND_DIRS.items():
            for path in spec_files(layer / dirname):
                issues.extend(_load_one(specs, known, layer_known, kind, model, path, registry, cache))
        hardware_files = [layer / f"{HARDWARE_STEM}{suffix}" for suffix in YAML_SUFFIXES]
        hardware_files = [p for p in hardware_files if p.is_file()]
        for i, path in enumerate(hardware_files):
            if i:
                issues.append(make_issue(path, 1, "", f"{display_path(hardware_files[0])} already holds the "
                                                      f"hardware profiles; keep one of the two files"))
                continue
            issues.extend(_load_hardware(specs, path, cache))
    if cache is not None and cache.written:
        cache.prune()
    issues.extend(check_references(specs, known, registry))
    if issues:
        raise SpecError([i.format() for i in sorted(set(issues))])
    return specs


def _load_one(specs: SpecSet, known: KnownIds, layer_known: KnownIds, kind: str, model: type[BaseModel],
              path: Path, registry: Any, cache: ParseCache | None = None) -> list[SpecIssue]:
    parsed = _read(path, cache)
    issues = list(parsed.issues)
    data = parsed.data
    if data is None:
        known.unreadable.add((kind, path.stem))
        return issues
    source = parsed.source
    raw_id = data.get("id")
    duplicate = False
    if not isinstance(raw_id, str) or not raw_id:
        known.unreadable.add((kind, path.stem))
    else:
        id_line = source.line(("id",))
        if path.stem != raw_id:
            issues.append(make_issue(path, id_line, "id", f"id {raw_id!r} does not match the file name "
                                                          f"{path.name!r}; rename the file to {raw_id}.yaml "
                                                          f"or set id: {path.stem}"))
        known.add(kind, raw_id, path, id_line)
        first = layer_known.add(kind, raw_id, path, id_line)
        if first is not None:
            duplicate = True
            issues.append(make_issue(path, id_line, "id", f"duplicate {kind} id {raw_id!r}; "
                                                          f"also defined at {display_path(first[0])}:{first[1]}"))
    # A spec that validates is kept even when its file has other problems (a misnamed file, an unknown
    # top-level key...), so that its cross references are checked too; load_specs raises anyway when
    # there are issues.
    spec = _validate(model, data, source, issues)
    if kind == "test" and registry is not None:
        # From the document itself, not the validated spec: a mistake elsewhere in the file must not
        # hide the errors of the validators' options.
        issues.extend(check_test_plugins(path, data, source, registry))
    if kind == "model" and spec is not None:
        for i, backend in enumerate(getattr(spec, "backends", [])):  # a replay's recording: relative to the spec's folder
            if backend.recording and not Path(backend.recording).is_absolute():
                backend.recording = str((path.parent / backend.recording).resolve())
            if backend.recording:
                from ..backends.replay import RecordingError, load_recording

                try:
                    load_recording(Path(backend.recording))
                except RecordingError as exc:
                    issues.append(make_issue(path, source.line(("backends", i, "recording")),
                                             f"backends[{i}].recording",
                                             f"{exc}; give the folder scripts/real_model.py record wrote "
                                             f"(relative to this file's folder)"))
    if spec is not None and not duplicate:
        below = specs.files.get((kind, spec.id))
        if below is not None:
            specs.replaced[(kind, spec.id)] = below
        specs._store(kind, spec)
        specs.files[(kind, spec.id)] = path
        specs.sources[(kind, spec.id)] = source
    return issues


def _read(path: Path, cache: ParseCache | None) -> ParsedFile:
    """``read_yaml(path)``, or what it gave for the same bytes before (specs/cache.py). Only a clean parse
    is cached, and only when the file still holds the bytes that were hashed once it has been parsed."""
    if cache is None:
        return read_yaml(path)
    raw = _read_bounded(path)
    if not isinstance(raw, bytes):  # unreadable, too big, not a regular file: the parser says why
        return read_yaml(path)
    key = content_key(raw)
    hit = cache.get(key)
    if hit is not None:
        return ParsedFile(path, hit.data, SourceMap(path, hit.lines), [])
    parsed = read_yaml(path)
    if parsed.data is not None and not parsed.issues and _read_bounded(path) == raw:
        cache.put(key, parsed.data, parsed.source.lines)
    return parsed


def _validate(model: type[BaseModel], data: dict[Any, Any], source: SourceMap,
              issues: list[SpecIssue]) -> Any:
    """The validated spec, or None with its problems added to ``issues``.

    When the only problems are unknown top-level keys, the spec without them is returned (the keys are
    still reported): what the rest of the file says is then checked too, instead of hiding behind a
    misspelt key.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        issues.extend(issues_from_validation(exc, model, data, source))
        unknown = {err["loc"][0] for err in exc.errors() if err["type"] == "extra_forbidden" and len(err["loc"]) == 1}
        if len(unknown) != exc.error_count():
            return None
    try:
        return model.model_validate({k: v for k, v in data.items() if k not in unknown})
    except ValidationError:
        return None


def _load_hardware(specs: SpecSet, path: Path, cache: ParseCache | None = None) -> list[SpecIssue]:
    parsed = _read(path, cache)
    issues = list(parsed.issues)
    if parsed.data is None:
        return issues
    hardware = _validate(HardwareProfiles, parsed.data, parsed.source, issues)
    if hardware is None or issues:
        return issues
    seen: dict[str, int] = {}
    for i, profile in enumerate(hardware.profiles):
        line = parsed.source.line(("profiles", i, "id"))
        if profile.id in seen:
            issues.append(make_issue(path, line, f"profiles[{i}].id",
                                     f"duplicate hardware profile id {profile.id!r}; first defined on line "
                                     f"{seen[profile.id]}"))
        seen.setdefault(profile.id, line)
    if not issues:
        mine = {p.id for p in hardware.profiles}
        for old in specs.hardware.profiles:
            if old.id in mine:
                specs.replaced[(HARDWARE_KIND, old.id)] = specs.files[(HARDWARE_KIND, old.id)]
        kept = [p for p in specs.hardware.profiles if p.id not in mine]
        specs.hardware = HardwareProfiles(profiles=[*kept, *hardware.profiles])
        for profile in hardware.profiles:
            specs.files[(HARDWARE_KIND, profile.id)] = path
            specs.sources[(HARDWARE_KIND, profile.id)] = parsed.source
    return issues


def _inside(path: Path, parent: Path) -> bool:
    try:
        Path(os.path.abspath(path)).relative_to(os.path.abspath(parent))
        return True
    except ValueError:
        return False


def shipped_specs_dir() -> Path | None:
    """The specs shipped inside the package (``gripprobe_core/_specs``: the checkout's ``specs/`` folder),
    resolved; None in an installation built without them."""
    here = Path(__file__).resolve().parent.parent / "_specs"
    try:
        here = here.resolve()
    except OSError:
        return None
    return here if (here / "tests").is_dir() else None


def spec_layers(given: Sequence[Path] = (), start: Path | None = None, *, shipped: bool = True) -> list[Path]:
    """The spec roots a command loads, bottom first: the shipped specs (unless ``shipped`` is false), then
    each folder in ``given`` (``--specs``, repeatable); without ``given``, the folders in
    ``$GRIPPROBE_SPECS`` (separated by ``os.pathsep``), else the nearest ``specs/`` folder holding
    ``tests/`` in ``start`` (default: the current directory) or its parents, if there is one. A folder
    given twice (or the shipped one given again) is loaded once, at its highest place.
    """
    layers: list[Path] = []
    base = shipped_specs_dir() if shipped else None
    if base is not None:
        layers.append(base)
    if given:
        on_top = [Path(p) for p in given]
    else:
        on_top = _from_env()
        if on_top is None:
            found = _nearest_specs(start)
            on_top = [found] if found is not None else []
    for p in on_top:
        if not p.is_dir():
            raise UserError(f"specs directory {display_path(p)} does not exist; pass --specs DIR (repeatable: "
                            f"later folders win by id) pointing at a folder holding models/, cli_agents/, "
                            f"tests/ or suites/")
        key = _same(p)
        layers = [q for q in layers if _same(q) != key]
        layers.append(p)
    if not layers:
        raise UserError("this installation ships no specs and none were given; pass --specs DIR "
                        f"(or set {SPECS_ENV})")
    return layers


def _same(p: Path) -> str:
    try:
        return str(p.resolve())
    except OSError:
        return os.path.abspath(p)


def _from_env() -> list[Path] | None:
    env = os.environ.get(SPECS_ENV)
    if not env:
        return None
    from ..store.names import check_path

    out = []
    for part in env.split(os.pathsep):
        if not part:
            continue
        path = check_path(Path(part).expanduser(), f"{SPECS_ENV}={env}")
        if not path.is_dir():
            raise UserError(f"{SPECS_ENV}={env}: {part} is not a directory; point it at your specs (the directory "
                            f"holding models/, cli_agents/, tests/, suites/; several separated by "
                            f"{os.pathsep!r})")
        out.append(path)
    return out


def _nearest_specs(start: Path | None) -> Path | None:
    here = Path(start) if start is not None else Path.cwd()
    try:
        here = here.resolve()
    except OSError:
        return None
    if here.name == "specs" and (here / "tests").is_dir():
        return here
    for directory in (here, *here.parents):
        candidate = directory / "specs"
        if (candidate / "tests").is_dir():
            return candidate
    return None
