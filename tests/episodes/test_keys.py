"""Decision keys of an episode log: same prefix and action, same keys; any difference in what the environment saw, another state."""

from __future__ import annotations

from arew.episodes import EpisodeLog, action_text, decision_keys


def _log(texts, replies, channels=None):
    channels = channels or ["as", "bt"] * (len(texts) // 2) + ["bt"] * (len(texts) % 2)
    return EpisodeLog(channels=list(channels), labels=[0] * len(texts), texts=list(texts), replies=list(replies))


def test_action_key_reads_the_payload_with_whitespace_collapsed():
    assert action_text("<scratch>think</scratch> <interact>1 vs  2\n on 3</interact>") == "interact:1 vs 2 on 3"
    assert action_text("blah <interact> 1 vs 2 on 3 </interact> other words") == "interact:1 vs 2 on 3"
    assert action_text("<answer>[0.5, 0.5]</answer>") == "answer:[0.5, 0.5]"
    assert action_text("no   tag\there") == "text:no tag here"  # no payload: the normalised text
    assert action_text(None) == "text:"


def test_same_history_same_keys_and_a_different_reply_splits_the_state():
    a = decision_keys(_log(["<interact>q1</interact>", "<interact>b1</interact>", "<interact>q2</interact>"], ["yes", "ok", None]))
    b = decision_keys(_log(["x <interact>q1</interact>", "<interact> b1</interact>", "<interact>q3</interact>"], ["yes", "ok", None]))
    c = decision_keys(_log(["<interact>q1</interact>", "<interact>b1</interact>", "<interact>q2</interact>"], ["no", "ok", None]))
    assert a["state"][:3] == b["state"][:3]  # scratch text and whitespace around the payload do not matter
    assert a["action"][:2] == b["action"][:2] and a["action"][2] != b["action"][2]
    assert a["state"][0] == c["state"][0] and a["state"][1] != c["state"][1]  # the reply "no" is another state
    assert a["action"] == c["action"]
    assert len(set(a["state"])) == 3  # each decision's prefix is its own state


def test_channel_is_part_of_the_state_and_keys_are_stable_63_bit_integers():
    texts, replies = ["<interact>q</interact>", "<interact>q</interact>"], ["r", None]
    as_first = decision_keys(_log(texts, replies, ["as", "as"]))
    bt_first = decision_keys(_log(texts, replies, ["bt", "as"]))
    assert as_first["state"][1] != bt_first["state"][1]
    keys = as_first["state"] + as_first["action"]
    assert all(type(k) is int and 0 <= k < 2**63 for k in keys)
    # fixed values: the keys must not depend on the process (Python's hash is salted)
    assert decision_keys(_log(["<interact>q</interact>"], [None], ["as"])) == {
        "state": [5708836300279000078],
        "action": [1692296701841498771],
    }
    # a decision's keys do not depend on the reply it got (only later decisions' states do)
    assert decision_keys(_log(["<interact>q</interact>"], ["later reply"], ["as"]))["state"] == [5708836300279000078]
    assert decision_keys(EpisodeLog()) == {"state": [], "action": []}
