"""F02: a key given twice in any JSON gpuplan reads is refused with one line naming it (never last-wins)."""

from __future__ import annotations

import json

import pytest

from domain.errors import InputError
from pipelines.io import strict_json
from pipelines.io.plan_io import read_problem
from pipelines.workspace.config import read_services

VALLEY = {"cluster": {"n_gpus": 8, "gpus_per_node": 8, "step_minutes": 30, "horizon_steps": 2},
          "services": [], "jobs": [{"job_id": "A", "kind": "training", "priority": 1, "release_step": 0,
                                     "gpus": 4, "duration_steps": 1}], "running": []}


def test_jobs_list_given_twice_is_refused(tmp_path):
    # the shipped case dup_jobs_key.json: a second "jobs" would silently drop the first list
    text = json.dumps(VALLEY)[:-1] + ', "jobs": []}'
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(InputError, match=r'p.json: key "jobs" is given twice in one object'):
        read_problem(path)


def test_nested_key_given_twice_names_key_and_line(tmp_path):
    text = '{\n "cluster": {"n_gpus": 8,\n  "n_gpus": 16, "gpus_per_node": 8, "step_minutes": 30, "horizon_steps": 2},\n' \
           ' "services": [], "jobs": [], "running": []}'
    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(InputError) as exc:
        read_problem(path)
    assert str(exc.value) == (f'problem file {path}: key "n_gpus" is given twice in one object (second at line 3); '
                              "each key must appear once")


def test_key_twice_inside_a_list_entry_of_services_json(tmp_path):
    path = tmp_path / "services.json"
    path.write_text('{"services": [{"service": "chat", "file": "a.csv", "service": "code"}]}')
    with pytest.raises(InputError, match='key "service" is given twice'):
        read_services(path)


def test_same_key_in_different_objects_is_fine_and_values_kept():
    doc = strict_json.loads('{"a": {"x": 1}, "b": {"x": 2}}', "t.json")
    assert doc == {"a": {"x": 1}, "b": {"x": 2}}


def test_invalid_json_still_one_line():
    with pytest.raises(InputError, match=r"^t.json is not valid JSON: Expecting value at line 1 column 7$"):
        strict_json.loads('{"a": }', "t.json")
