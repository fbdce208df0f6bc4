"""Fleet and quota specs for simulations: `PODSxRACKSxNODESxGPUS[:accelerator]`, JSON fleets, quota files.

A JSON fleet is one group or `{"groups": [...]}`, each group
`{"pods": 2, "racks": 8, "nodes": 10, "gpus": 8, "accelerator": "h100"}`; pods are numbered across
groups, so two groups are two sets of pods. Quota files are JSON (a list of objects) or CSV with
`team,guaranteed,borrow_limit[,lend_limit,accelerator,department]`.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduling.engine import Node, Quota, Team

DEFAULT_ACCELERATOR = "gpu"
DEFAULT_DEPARTMENT = "fleet"
_SHORTHAND = re.compile(r"^(\d+)x(\d+)x(\d+)x(\d+)(?::([A-Za-z0-9_.-]+))?$")


class SpecError(ValueError):
    """A fleet or quota spec that cannot be used; the message says where and why."""


@dataclass(frozen=True, slots=True)
class NodeGroup:
    pods: int
    racks: int
    nodes: int
    gpus: int
    accelerator: str = DEFAULT_ACCELERATOR


@dataclass(frozen=True, slots=True)
class Fleet:
    groups: tuple[NodeGroup, ...]

    def nodes(self) -> tuple[Node, ...]:
        result: list[Node] = []
        pod_base = 0
        for group in self.groups:
            for pod in range(group.pods):
                pod_name = f"p{pod_base + pod:02d}"
                for rack in range(group.racks):
                    for node in range(group.nodes):
                        node_id = f"{pod_name}-r{rack:02d}-n{node:02d}"
                        result.append(
                            Node(node_id, pod_name, f"r{rack:02d}", group.accelerator, group.gpus, group.gpus)
                        )
            pod_base += group.pods
        return tuple(result)

    @property
    def capacity_gpus(self) -> int:
        return sum(g.pods * g.racks * g.nodes * g.gpus for g in self.groups)

    def capacity_of(self, accelerator: str) -> int:
        return sum(g.pods * g.racks * g.nodes * g.gpus for g in self.groups if g.accelerator == accelerator)

    def gpus_per_node(self, accelerator: str) -> int | None:
        sizes = {g.gpus for g in self.groups if g.accelerator == accelerator}
        return max(sizes) if sizes else None

    @property
    def accelerators(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(g.accelerator for g in self.groups))

    def describe(self) -> str:
        return " + ".join(f"{g.pods}x{g.racks}x{g.nodes}x{g.gpus}:{g.accelerator}" for g in self.groups)


def _group(pods: Any, racks: Any, nodes: Any, gpus: Any, accelerator: Any, where: str) -> NodeGroup:
    values = {"pods": pods, "racks": racks, "nodes": nodes, "gpus": gpus}
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(f"{where}: {name} must be a positive whole number, got {value!r}")
    if not isinstance(accelerator, str) or not accelerator:
        raise SpecError(f"{where}: accelerator must be a non-empty name, got {accelerator!r}")
    return NodeGroup(pods, racks, nodes, gpus, accelerator)


def parse_fleet(spec: str) -> Fleet:
    """`2x8x10x8` or `2x8x10x8:h100` (pods x racks x nodes x GPUs per node), or a JSON file path."""
    text = spec.strip()
    match = _SHORTHAND.match(text)
    if match:
        pods, racks, nodes, gpus = (int(match.group(i)) for i in range(1, 5))
        return Fleet((_group(pods, racks, nodes, gpus, match.group(5) or DEFAULT_ACCELERATOR, repr(spec)),))
    path = Path(text)
    if text.endswith(".json") or path.is_file():
        return _fleet_from_json(path)
    raise SpecError(
        f"fleet {spec!r} is neither PODSxRACKSxNODESxGPUS[:accelerator] (e.g. 2x8x10x8:h100) nor a JSON file"
    )


def _fleet_from_json(path: Path) -> Fleet:
    data = _read_json(path)
    groups = data.get("groups", [data]) if isinstance(data, dict) else None
    if not isinstance(groups, list) or not groups:
        raise SpecError(f'{path}: expected an object with pods/racks/nodes/gpus or {{"groups": [...]}}')
    parsed: list[NodeGroup] = []
    for index, group in enumerate(groups):
        where = f"{path}: group {index}"
        if not isinstance(group, dict):
            raise SpecError(f"{where}: expected an object, got {type(group).__name__}")
        unknown = sorted(set(group) - {"pods", "racks", "nodes", "gpus", "accelerator"})
        if unknown:
            raise SpecError(f"{where}: unknown key {unknown[0]!r}")
        parsed.append(
            _group(
                group.get("pods"),
                group.get("racks"),
                group.get("nodes"),
                group.get("gpus", 8),
                group.get("accelerator", DEFAULT_ACCELERATOR),
                where,
            )
        )
    return Fleet(tuple(parsed))


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise SpecError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None


@dataclass(frozen=True, slots=True)
class QuotaSpec:
    quotas: tuple[Quota, ...]
    departments: tuple[tuple[str, str], ...]  # (team, department)


def load_quotas(path: str | Path, *, default_accelerator: str = DEFAULT_ACCELERATOR) -> QuotaSpec:
    """Read a quota file (JSON list of objects, or CSV); fields as in the module docstring."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        data = _read_json(path)
        if not isinstance(data, list):
            raise SpecError(f"{path}: expected a JSON list of quota objects")
        rows = [(f"{path}: entry {index}", row) for index, row in enumerate(data)]
    else:
        rows = _quota_csv_rows(path)
    quotas: list[Quota] = []
    departments: dict[str, str] = {}
    seen: set[tuple[str, str]] = set()
    for where, row in rows:
        quota, department = _quota(row, where, default_accelerator)
        key = (quota.team, quota.accelerator)
        if key in seen:
            raise SpecError(f"{where}: team {quota.team!r} has a second quota for {quota.accelerator!r}")
        seen.add(key)
        quotas.append(quota)
        departments.setdefault(quota.team, department)
    if not quotas:
        raise SpecError(f"{path}: no quotas in the file")
    return QuotaSpec(tuple(quotas), tuple(sorted(departments.items())))


def _quota_csv_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in ("team", "guaranteed", "borrow_limit") if c not in (reader.fieldnames or [])]
            if missing:
                raise SpecError(f"{path}:1: column {missing[0]!r}: required column is missing")
            return [
                (f"{path}:{reader.line_num}", {k: v for k, v in row.items() if v not in (None, "")})
                for row in reader
                if any((value or "").strip() for value in row.values())
            ]
    except OSError as exc:
        raise SpecError(f"{path}: cannot be read: {exc.strerror or exc}") from None


def _quota(row: Any, where: str, default_accelerator: str) -> tuple[Quota, str]:
    if not isinstance(row, dict):
        raise SpecError(f"{where}: expected an object")
    team = str(row.get("team") or "").strip()
    if not team:
        raise SpecError(f"{where}: column 'team': is empty")

    def count(name: str, required: bool) -> int | None:
        value = row.get(name)
        if value is None:
            if required:
                raise SpecError(f"{where}: column {name!r}: is empty")
            return None
        try:
            number = int(str(value).strip())
        except ValueError:
            raise SpecError(f"{where}: column {name!r}: {value!r} is not a whole number") from None
        if number < 0:
            raise SpecError(f"{where}: column {name!r}: {number} must not be negative")
        return number

    guaranteed, borrow = count("guaranteed", True), count("borrow_limit", True)
    assert guaranteed is not None and borrow is not None
    accelerator = str(row.get("accelerator") or default_accelerator).strip()
    department = str(row.get("department") or DEFAULT_DEPARTMENT).strip()
    return Quota(team, accelerator, guaranteed, borrow, count("lend_limit", False)), department


def teams_for(names: set[str] | list[str], spec: QuotaSpec | None) -> tuple[Team, ...]:
    departments = dict(spec.departments) if spec else {}
    return tuple(Team(name, departments.get(name, DEFAULT_DEPARTMENT)) for name in sorted(set(names)))
