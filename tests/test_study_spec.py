"""Study specs: what the kit accepts, expansion into runs, scaling, and bad specs refused."""

from __future__ import annotations

import textwrap

import pytest
import yaml
from study_fixtures import STUDIES, fake_kit

from analysis.study import plan, spec
from analysis.study.kit import Kit, KitError
from analysis.study.spec import SpecError


@pytest.fixture
def kit(tmp_path):
    return fake_kit(tmp_path / "kit")


def load_text(tmp_path, kit: Kit, text: str, name: str = "study.yml") -> spec.StudySpec:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return spec.load(path, kit)


def test_kit_reads_engines_faults_and_parameters_from_the_roles(tmp_path):
    kit = fake_kit(tmp_path, faults=("kill_taskmanager", "network_delay"))
    assert kit.engines == ("flink", "storm")
    assert kit.faults == ("kill_taskmanager", "network_delay", "none")
    assert "checkpoint_interval_s" in kit.study_parameters
    assert "count" in kit.study_parameters
    for set_by_the_study in ("engine", "fault", "run_id", "results_dir"):
        assert set_by_the_study not in kit.study_parameters
    assert kit.owner("checkpoint_interval_s") == "flink"
    assert kit.owner("storm_message_timeout_s") == "storm"
    assert kit.owner("rate") is None
    assert kit.default_inventory() == "inventory/local"
    # A new setting of the experiment role is a study parameter at once.
    defaults = tmp_path / "roles/experiment/defaults/main.yml"
    defaults.write_text(defaults.read_text() + "experiment_new_knob: 3\n")
    fault = tmp_path / "roles/fault/tasks/types/node_down.yml"
    fault.write_text("---\n")
    reloaded = Kit.load(tmp_path)
    assert "new_knob" in reloaded.study_parameters
    assert "node_down" in reloaded.faults


def test_smoke_spec_expands_to_exactly_its_runs(kit):
    smoke = spec.load(STUDIES / "smoke.yml", kit)
    runs = plan.expand(smoke, kit, "smoke")
    assert [r.run_id for r in runs] == [
        "smoke-flink-kill_taskmanager-r1",
        "smoke-storm-kill_storm_worker-r1",
    ]
    given = yaml.safe_load((STUDIES / "smoke.yml").read_text())
    first, second = runs
    assert first.engine == "flink" and first.fault == "kill_taskmanager"
    assert first.parameters == {
        "count": given["parameters"]["count"],
        "rate": given["parameters"]["rate"],
        "warmup_s": given["parameters"]["warmup_s"],
        "checkpoint_interval_s": 2,
        "fault_at_s": given["faults"][0]["fault_at_s"],
        "duration_s": given["faults"][0]["duration_s"],
    }
    # Storm's run gets Storm's setting only; a setting given once is not in the run names.
    assert "checkpoint_interval_s" not in second.parameters
    assert second.parameters["storm_message_timeout_s"] == 10
    assert second.fault == "kill_storm_worker"
    extravars = first.extravars("/r")
    assert extravars["engine"] == "flink" and extravars["fault"] == "kill_taskmanager"
    assert extravars["run_id"] == first.run_id and extravars["results_dir"] == "/r"


def test_flink_vs_storm_spec_expands_to_27_runs(kit):
    study = spec.load(STUDIES / "flink-vs-storm.yml", kit)
    runs = plan.expand(study, kit, "flink-vs-storm")
    # Flink: 3 intervals x 2 faults (the reference's orderly stop and a kill); Storm: 3 timeouts.
    assert len(runs) == (3 * 2 + 3) * 3
    assert len({r.run_id for r in runs}) == 27
    flink = [r for r in runs if r.engine == "flink"]
    storm = [r for r in runs if r.engine == "storm"]
    assert sorted({r.parameters["checkpoint_interval_s"] for r in flink}) == [5, 30, 60]
    assert sorted({r.parameters["storm_message_timeout_s"] for r in storm}) == [5, 30, 60]
    assert {r.fault for r in flink} == {"stop_taskmanager", "kill_taskmanager"}
    assert {r.fault for r in storm} == {"kill_supervisor"}
    assert sorted({r.repetition for r in runs}) == [1, 2, 3]
    assert all(r.parameters["count"] == 320000 and r.parameters["rate"] == 2000 for r in runs)
    assert study.advice is not None and study.advice.mtbf_s == 600


def test_guarantees_spec_runs_each_engine_under_each_guarantee_it_offers(kit):
    study = spec.load(STUDIES / "guarantees.yml", kit)
    runs = plan.expand(study, kit, "guarantees")
    assert len(runs) == 15
    assert sorted({(r.engine, r.parameters["guarantee"]) for r in runs}) == [
        ("flink", "at_least_once"),
        ("flink", "at_most_once"),
        ("flink", "exactly_once"),
        ("storm", "at_least_once"),
        ("storm", "at_most_once"),
    ]


def test_checkpoint_interval_spec_and_its_scale(kit):
    study = spec.load(STUDIES / "checkpoint-interval.yml", kit)
    full = plan.make_plan(study, kit, 1.0, order_seed=7)
    assert full.study == "checkpoint-interval"
    assert len(full.runs) == 9
    assert sorted({r.parameters["checkpoint_interval_s"] for r in full.runs}) == [5, 30, 300]
    assert {(r.parameters["fault_every_s"], r.parameters["fault_count"]) for r in full.runs} == {
        (600, 3)
    }
    small = plan.make_plan(study, kit, 0.5, order_seed=7)
    assert small.study == "checkpoint-interval-scale0p5"
    assert all(r.run_id.startswith("checkpoint-interval-scale0p5-flink-") for r in small.runs)
    assert sorted({r.parameters["checkpoint_interval_s"] for r in small.runs}) == [3, 15, 150]
    one = small.runs[0].parameters
    assert one["count"] == study.parameters["count"][0] // 2
    assert (one["fault_at_s"], one["fault_every_s"], one["fault_count"]) == (300, 300, 3)
    # Timeouts that guard the measurement keep their value.
    assert one["drain_timeout_s"] == study.parameters["drain_timeout_s"][0]
    assert small.spec.advice is not None and small.spec.advice.mtbf_s == pytest.approx(300)
    scaled = {(v.key, v.before): v.after for v in small.scaled}
    assert scaled[("parameters.checkpoint_interval_s", 5)] == 3
    assert scaled[("faults[0].fault_every_s", 600)] == 300
    # Scaled further, the run would end too soon after its last fault to show the recovery
    # (recovery_window_s is not scaled: an engine does not recover faster in a shorter study).
    with pytest.raises(SpecError) as too_short:
        plan.make_plan(study, kit, 0.25, order_seed=7)
    assert "recovery_window_s=120" in str(too_short.value)
    with pytest.raises(SpecError) as refused:
        plan.make_plan(study, kit, 0.01, order_seed=7)
    assert refused.value.key == "parameters.checkpoint_interval_s"
    assert "the same value twice" in str(refused.value)


def test_a_swept_guarantee_runs_on_the_engines_that_offer_it(tmp_path, kit):
    study = load_text(
        tmp_path,
        kit,
        BASE + "  guarantee: [at_most_once, exactly_once]\n",
    )
    runs = plan.expand(study, kit, "g")
    assert [(r.engine, r.parameters["guarantee"]) for r in runs] == [
        ("flink", "at_most_once"),
        ("flink", "exactly_once"),
        ("storm", "at_most_once"),
    ]
    assert runs[1].run_id == "g-flink-guarantee_exactly_once-none-r1"
    assert kit.guarantees == {
        "flink": ("at_most_once", "at_least_once", "exactly_once"),
        "storm": ("at_most_once", "at_least_once"),
    }


def test_a_setting_given_per_engine_runs_each_engine_with_its_own(tmp_path, kit):
    study = load_text(
        tmp_path,
        kit,
        "engines: [flink, storm]\nparameters:\n  count: 40000\n"
        "  guarantee: {flink: exactly_once, storm: at_most_once}\n"
        "  warmup_s: {storm: [4, 6]}\n",
    )
    runs = plan.expand(study, kit, "g")
    assert [(r.run_id, r.parameters) for r in runs] == [
        ("g-flink-none-r1", {"count": 40000, "guarantee": "exactly_once"}),
        (
            "g-storm-warmup_s_4-none-r1",
            {"count": 40000, "guarantee": "at_most_once", "warmup_s": 4},
        ),
        (
            "g-storm-warmup_s_6-none-r1",
            {"count": 40000, "guarantee": "at_most_once", "warmup_s": 6},
        ),
    ]
    scaled, found = plan.scale_spec(study, 0.5)
    assert scaled.per_engine["warmup_s"] == {"storm": (2, 3)}
    assert scaled.parameters["warmup_s"] == (2, 3)
    assert [(f.key, f.before, f.after) for f in found if "warmup_s" in f.key] == [
        ("parameters.warmup_s.storm", 4, 2),
        ("parameters.warmup_s.storm", 6, 3),
    ]
    # Each engine's values are scaled apart: one each that meet when scaled are not refused.
    apart = load_text(
        tmp_path, kit, "engines: [flink, storm]\nparameters:\n  warmup_s: {flink: 10, storm: 11}\n"
    )
    assert plan.scale_spec(apart, 0.1)[0].per_engine["warmup_s"] == {"flink": (1,), "storm": (1,)}


def test_run_order_is_shuffled_by_the_seed(kit):
    study = spec.load(STUDIES / "flink-vs-storm.yml", kit)
    in_spec_order = [r.run_id for r in plan.expand(study, kit, "flink-vs-storm")]
    first = [r.run_id for r in plan.make_plan(study, kit, 1.0, order_seed=11).runs]
    again = [r.run_id for r in plan.make_plan(study, kit, 1.0, order_seed=11).runs]
    other = [r.run_id for r in plan.make_plan(study, kit, 1.0, order_seed=12).runs]
    assert first == again
    assert sorted(first) == sorted(in_spec_order) == sorted(other)
    assert first != in_spec_order and first != other
    # The engines are interleaved, not run one block after the other.
    engines = [run_id.split("-")[3] for run_id in first]
    assert engines[:9] != ["flink"] * 9 and engines[:9] != ["storm"] * 9


def test_estimate_covers_producing_draining_and_overhead(kit):
    study = spec.load(STUDIES / "smoke.yml", kit)
    run = plan.expand(study, kit, "smoke")[0]
    given = study.parameters
    produce = -(-given["count"][0] // given["rate"][0])
    expected = produce + 2 + kit.defaults["quiet_s"] + plan.RUN_OVERHEAD_S
    assert plan.estimated_s(run, kit) == pytest.approx(expected)
    assert plan.estimated_s(run, kit, overhead_s=0) == pytest.approx(expected - plan.RUN_OVERHEAD_S)


# 20 s of messages at the default rate (2,000/s).
BASE = """\
engines: [flink, storm]
parameters:
  count: 40000
"""


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        (
            BASE + "  chekpoint_interval_s: 5\n",
            "parameters.chekpoint_interval_s",
            ["not an experiment parameter", "did you mean checkpoint_interval_s"],
        ),
        ("engines: [flink, spark]\n", "engines[1]", ["'spark' is not an engine", "flink, storm"]),
        (
            BASE + "faults:\n  - {fault: kill_jobmanager}\n",
            "faults[0].fault",
            ["not a fault type", "kill_taskmanager"],
        ),
        (BASE + "  rate: []\n", "parameters.rate", ["an empty list"]),
        ("engines: []\n", "engines", ["an empty list"]),
        (BASE + "faults: []\n", "faults", ["non-empty list"]),
        (BASE + "  rate: [1000, 1000]\n", "parameters.rate", ["listed twice"]),
        (BASE + "  rate: fast\n", "parameters.rate", ["must be a number"]),
        (BASE + "  sink_idempotence: 1\n", "parameters.sink_idempotence", ["true or false"]),
        (BASE + "  rate: {a: 1}\n", "parameters.rate.a", ["not an engine of this study"]),
        (BASE + "  rate: {flink: [1, {b: 2}]}\n", "parameters.rate.flink[1]", ["not a value"]),
        (
            BASE + "  checkpoint_interval_s: {flink: 5}\n",
            "parameters.checkpoint_interval_s",
            ["only flink's runs use it"],
        ),
        (
            BASE + "  guarantee: {flink: exactly_once}\n  sink_idempotence: false\n",
            "parameters.sink_idempotence",
            ["guarantee exactly_once needs sink_idempotence true"],
        ),
        (
            BASE + "  guarantee: {flink: exactly_once, storm: exactly_once}\n",
            "parameters.guarantee.storm",
            ["storm does not offer exactly_once", "it offers at_most_once, at_least_once"],
        ),
        (BASE + "repetition: 3\n", "repetition", ["not a spec key", "did you mean repetitions"]),
        (BASE + "repetitions: 0\n", "repetitions", ["at least 1"]),
        (BASE + "  engine: flink\n", "parameters.engine", ["engines"]),
        (BASE + "  run_id: x\n", "parameters.run_id", ["not an experiment parameter"]),
        (BASE + "  fault_at_s: 5\n", "parameters.fault_at_s", ["faults:"]),
        (
            "engines: [flink]\nparameters:\n  storm_workers: 2\n",
            "parameters.storm_workers",
            ["only storm's runs use it", "add storm to engines"],
        ),
        (
            BASE + "faults:\n  - {fault: kill_taskmanager, engines: [flink], fault_at_s: 2}\n",
            "faults",
            ["no entry applies to storm"],
        ),
        (
            BASE + "faults:\n  - {fault: none, fault_at_s: 2}\n",
            "faults[0].fault_at_s",
            ["injects nothing"],
        ),
        (
            BASE + "faults:\n  - {fault: network_delay, delay_ms: -5}\n",
            "faults[0].delay_ms",
            ["-5 must be a whole number of at least 0"],
        ),
        (
            BASE + "faults:\n  - {fault: node_down, fault_count: 0}\n",
            "faults[0].fault_count",
            ["0 must be a whole number of at least 1", "the experiment refuses it"],
        ),
        (
            BASE + "faults:\n  - {fault: node_down, fault_at_s: [2, 2.5]}\n",
            "faults[0].fault_at_s[1]",
            ["2.5 must be a whole number of at least 0"],
        ),
        (BASE + "faults:\n  - {fault: node_down, at: 5}\n", "faults[0].at", ["not a fault"]),
        (
            BASE + "faults:\n  - {fault: node_down, engines: [spark]}\n",
            "faults[0].engines[0]",
            ["not one of the study's engines"],
        ),
        (BASE + "  warmup_s: 20\n", "parameters.warmup_s", ["covers the whole", "(20 s of"]),
        (
            BASE + "faults:\n  - {fault: node_down, fault_at_s: 5, fault_every_s: 8, "
            "fault_count: 3}\n",
            "faults[0].fault_at_s",
            ["end 31 s after the producer's start", "sends for 20 s"],
        ),
        (
            # recovery_window_s: 0, so that the names are what is checked, not these short runs.
            BASE + "  recovery_window_s: 0\n"
            "faults:\n  - {fault: node_down, fault_at_s: 5, duration_s: 5}\n"
            "  - {fault: node_down, fault_at_s: 5, duration_s: 9}\n",
            "faults[1]",
            ["same run names as faults[0]", "label"],
        ),
        # The experiment's own ranges, before any run: every run would refuse these.
        (
            BASE + "  checkpoint_interval_s: [5, 0]\n",
            "parameters.checkpoint_interval_s[1]",
            ["0 must be a whole number from 1 to 86400", "the experiment refuses it"],
        ),
        (
            BASE + "  storm_message_timeout_s: 2.5\n",
            "parameters.storm_message_timeout_s",
            ["2.5 must be a whole number from 1 to 86400"],
        ),
        # The ranges and choices an engine's manifest declares.
        (
            BASE + "  storm_max_spout_pending: 2000000\n",
            "parameters.storm_max_spout_pending",
            ["2000000 must be a whole number from 1 to 1000000"],
        ),
        (
            BASE + "  storm_wait_strategy: spin\n",
            "parameters.storm_wait_strategy",
            ["'spin' is not one of park, progressive", "engine.yml"],
        ),
        (
            BASE + "  quiet_s: -1\n",
            "parameters.quiet_s",
            ["at least 0 (0 derives it or turns it off)"],
        ),
        (BASE + "  rate: 0\n", "parameters.rate", ["must be a number of messages/s above 0"]),
        # The experiment's argument spec's choices, and the guarantees each engine offers.
        (
            BASE + "  guarantee: [at_least_once, twice]\n",
            "parameters.guarantee[1]",
            ["'twice' is not one of at_most_once, at_least_once, exactly_once"],
        ),
        (
            BASE + "  guarantee: exactly_once\n",
            "parameters.guarantee",
            [
                "storm does not offer exactly_once (Storm's KafkaBolt is not transactional",
                "it offers at_most_once, at_least_once",
                "remove storm from engines",
            ],
        ),
        (BASE + "advice: {mtbf_s: 0}\n", "advice.mtbf_s", ["above 0"]),
        (BASE + "advice: {max_p99_ms: 10}\n", "advice.mtbf_s", ["missing"]),
        (BASE + "name: Big Study\n", "name", ["lower-case"]),
        ("- flink\n", "", ["a spec is a YAML mapping"]),
    ],
)
def test_bad_spec_is_refused_naming_the_key(tmp_path, kit, text, key, words):
    with pytest.raises(SpecError) as refused:
        study = load_text(tmp_path, kit, text)
        plan.make_plan(study, kit, 1.0, order_seed=1)
    assert refused.value.key == key
    message = str(refused.value)
    assert message.startswith(f"{tmp_path / 'study.yml'}: {key + ': ' if key else ''}")
    for word in words:
        assert word in message


def test_labels_tell_faults_of_one_type_apart(tmp_path, kit):
    study = load_text(
        tmp_path,
        kit,
        BASE + "  recovery_window_s: 0\n"
        "faults:\n"
        "  - {fault: node_down, fault_at_s: 5, duration_s: 5, label: short-outage}\n"
        "  - {fault: node_down, fault_at_s: 5, duration_s: 9}\n"
        "  - {fault: network_delay, fault_at_s: 5, delay_ms: [50, 200]}\n",
    )
    names = [r.run_id for r in plan.expand(study, kit, "study") if r.engine == "flink"]
    assert names == [
        "study-flink-short-outage-r1",
        "study-flink-node_down-r1",
        "study-flink-network_delay-delay_ms_50-r1",
        "study-flink-network_delay-delay_ms_200-r1",
    ]


def test_spec_name_defaults_to_the_file_name(tmp_path, kit):
    study = load_text(tmp_path, kit, BASE, name="my-study.yml")
    assert study.name == "my-study"
    assert study.faults[0].fault == "none" and study.faults[0].engines == ("flink", "storm")
    assert study.repetitions == 1 and study.max_failures == spec.DEFAULT_MAX_FAILURES


def test_unreadable_or_invalid_yaml_is_refused(tmp_path, kit):
    with pytest.raises(SpecError, match="cannot read the spec"):
        spec.load(tmp_path / "missing.yml", kit)
    with pytest.raises(SpecError, match="not valid YAML"):
        load_text(tmp_path, kit, "engines: [flink\n")


def test_a_schedule_that_leaves_less_than_recovery_window_s_is_refused_naming_it(kit, tmp_path):
    path = tmp_path / "short.yml"
    path.write_text(
        "description: too short after the fault\n"
        "engines: [flink]\n"
        "parameters: {count: 30000, rate: 1000}\n"
        "faults:\n"
        "  - {fault: kill_taskmanager, fault_at_s: 10, duration_s: 5}\n"
    )
    study = spec.load(path, kit)
    with pytest.raises(spec.SpecError) as refused:
        plan.make_plan(study, kit, 1.0, order_seed=1)
    message = str(refused.value)
    assert "faults[0].fault_at_s" in message and "recovery_window_s=120" in message
    assert "leaving 15 s" in message and "Raise count to at least 135,000" in message
    # The same schedule with the window it leaves is accepted.
    path.write_text(path.read_text().replace("count: 30000", "count: 135000"))
    assert len(plan.make_plan(spec.load(path, kit), kit, 1.0, order_seed=1).runs) == 1


def test_the_kit_refuses_a_manifest_that_breaks_its_contract(tmp_path):
    """A setting two engines declare, or an engine without a coordinator daemon, stops the kit
    from loading, naming the file: a study would otherwise use one engine's range for both."""
    fake_kit(tmp_path)
    storm = tmp_path / "roles/experiment/tasks/storm/engine.yml"
    manifest = yaml.safe_load(storm.read_text())
    clash = {
        **manifest,
        "_experiment_engine_settings": {
            **manifest["_experiment_engine_settings"],
            "checkpoint_interval_s": {"default": 5, "min": 1, "max": 9, "description": "again"},
        },
    }
    storm.write_text(yaml.safe_dump(clash))
    with pytest.raises(KitError, match="setting checkpoint_interval_s is declared twice"):
        Kit.load(tmp_path)
    workers_only = {
        **manifest,
        "_experiment_engine_daemons": {
            "storm-supervisor": {"role": "worker", "group": "storm_supervisor"},
        },
    }
    storm.write_text(yaml.safe_dump(workers_only))
    with pytest.raises(KitError, match="one coordinator daemon"):
        Kit.load(tmp_path)
    storm.write_text(yaml.safe_dump(manifest))
    assert Kit.load(tmp_path).replay_bound["storm"] == "storm_message_timeout_s"
