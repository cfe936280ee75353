"""producer.topics: --config KEY=VALUE settings for every topic created."""

from __future__ import annotations

import pytest

from producer import topics


class FakeAdmin:
    def __init__(self):
        self.created = []

    def create_topics(self, new_topics, timeout_ms):
        self.created = [
            (t.name, t.num_partitions, t.replication_factor, t.topic_configs) for t in new_topics
        ]

    def describe_topics(self, names):
        return [
            {"error_code": 0, "partitions": [{"leader_id": 1} for _ in range(self.created[0][1])]}
            for _ in names
        ]


def test_every_topic_gets_every_setting():
    admin = FakeAdmin()
    configs = {"message.timestamp.type": "LogAppendTime", "retention.ms": "-1"}
    topics.create_topics(admin, ["in", "out"], 4, 3, configs, 5)
    assert admin.created == [("in", 4, 3, configs), ("out", 4, 3, configs)]


def base(*extra):
    return ["--bootstrap", "h:9092", "--partitions", "4", "--replication", "1", *extra, "t1"]


def test_config_options_are_collected():
    args = topics.parse_args(
        base(
            "--config", "message.timestamp.type=LogAppendTime", "--config", "min.insync.replicas=2"
        )
    )
    assert args.configs == {"message.timestamp.type": "LogAppendTime", "min.insync.replicas": "2"}
    assert topics.parse_args(base()).configs == {}


@pytest.mark.parametrize(
    "setting,message",
    [
        ("LogAppendTime", "argument --config: must be KEY=VALUE, e.g. message.timestamp.type="),
        ("=LogAppendTime", "argument --config: must be KEY=VALUE"),
        ("message.timestamp.type=", "argument --config: must be KEY=VALUE"),
        ("bad key=1", "argument --config: must be KEY=VALUE"),
    ],
)
def test_a_setting_that_is_not_key_equals_value_is_refused(capsys, setting, message):
    with pytest.raises(SystemExit) as exit_info:
        topics.main(base("--config", setting))
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_a_setting_given_twice_is_refused(capsys):
    with pytest.raises(SystemExit):
        topics.main(base("--config", "retention.ms=1", "--config", "retention.ms=2"))
    assert "argument --config: retention.ms given more than once" in capsys.readouterr().err
