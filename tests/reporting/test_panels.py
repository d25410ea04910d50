"""The panel list on its own: patterns, needs and the missing-key check the e2e test relies on."""

import pytest

from arew.reporting.panels import SECTIONS, Panel, matching, missing_keys, panels


def test_sections_follow_the_papers_order_and_titles_are_unique():
    assert [s.name for s in SECTIONS] == ["Outcome reward", "AS channel", "BT channel", "Self-locking", "Critiques", "Off-policy"]
    titles = [p.title for p in panels()]
    assert len(titles) == len(set(titles))


def test_a_star_matches_one_path_segment_only():
    keys = ["val-core/pe/reward/mean@1", "val-core/a/b/reward/mean@1", "val-aux/pe/reward/std@1"]
    assert matching("val-core/*/reward/mean@*", keys) == ["val-core/pe/reward/mean@1"]
    assert matching("critic/score/mean", keys) == []


def test_missing_keys_names_what_a_run_did_not_log():
    always = [k for p in panels(["always"]) for k in p.keys]
    assert missing_keys(always) == []
    assert missing_keys(always[1:]) == [always[0]]
    assert "selflock/corr_gap" not in always  # a PE-only key is not required of every run


def test_unknown_needs_is_refused():
    with pytest.raises(ValueError, match="needs must be one of"):
        Panel("x", ("a",), "b", healthy="up", locked="flat", needs="sometimes")


def test_every_panel_says_what_healthy_and_self_locked_look_like():
    with pytest.raises(ValueError, match="healthy and a self-locked"):
        Panel("x", ("a",), "b", healthy="up", locked=" ")
    assert all(p.healthy and p.locked for p in panels())


def test_the_critique_count_panels_are_drawn_as_shares_of_their_three_counts():
    shared = {p.title: p.keys for p in panels() if p.shares}
    assert shared == {"AS critiques": ("arew/as/pos", "arew/as/zero", "arew/as/neg"), "BT critiques": ("arew/bt/pos", "arew/bt/zero", "arew/bt/neg")}
    with pytest.raises(ValueError, match="at least two"):
        Panel("x", ("a",), "b", healthy="up", locked="flat", shares=True)
