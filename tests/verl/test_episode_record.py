"""The agent loop's record of a sample, as verl carries it in ``extra_fields``: written and read by one schema."""

from __future__ import annotations

from types import SimpleNamespace

from arew.core import make_record
from arew.verl_plugin.episode_record import KEYS, EpisodeRecord


def test_a_record_reads_back_as_written_and_absent_fields_stay_out():
    record = EpisodeRecord(name="train:3:0", turns=make_record([(0, 4)], ["as"], [1]), info={"reward": 1.0}, transcript={"turns": []})
    fields = record.extra_fields()
    assert set(fields) == {KEYS["name"][0], KEYS["turns"][0], KEYS["info"][0], KEYS["transcript"][0]}
    assert EpisodeRecord.read(fields) == record and EpisodeRecord.read(SimpleNamespace(data=fields)) == record  # verl may wrap it
    assert not record.failed and EpisodeRecord.read(fields).malformed == ()


def test_fields_of_the_wrong_type_read_as_absent_and_are_named_and_a_broken_failure_still_fails():
    raw = {KEYS["name"][0]: 7, KEYS["info"][0]: "not a dict", KEYS["failure"][0]: "boom", KEYS["turns"][0]: "left to the core"}
    record = EpisodeRecord.read(raw)
    assert record.malformed == ("name", "info", "failure")
    assert record.name is None and record.info is None
    assert record.failed and record.failure["reason"] == "malformed"
    assert record.turns == "left to the core"  # collect_segments checks it whole and applies algorithm.arew.on_invalid


def test_anything_but_a_dict_is_a_record_without_fields():
    for value in (None, "x", 3, ["arew_episode"]):
        assert EpisodeRecord.read(value) == EpisodeRecord() and not EpisodeRecord.read(value).failed
