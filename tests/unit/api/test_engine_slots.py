"""EngineSlots: a user's share and the server's total of model processes, freed when the work ends or fails."""

from __future__ import annotations

import pytest

from tunedeck.api.engine_slots import EngineSlots, EngineSlotsFull


def test_a_user_holds_at_most_their_share_and_the_server_its_total() -> None:
    slots = EngineSlots(total=2, per_user=1)
    with slots.hold("alice", "generation"):
        with pytest.raises(EngineSlotsFull, match="at most 1 per user"):
            slots.hold("alice", "export").__enter__()
        with slots.hold("bob", "export"):
            assert slots.running() == 2
            with pytest.raises(EngineSlotsFull, match="the most it runs at once"):
                slots.hold("carol", "preflight").__enter__()
    assert slots.running() == 0
    with slots.hold("carol", "preflight"):  # every slot came back
        assert slots.running() == 1


def test_a_failing_process_gives_its_slot_back() -> None:
    slots = EngineSlots(total=1, per_user=1)
    with pytest.raises(RuntimeError), slots.hold("alice", "export"):
        raise RuntimeError("the export failed")
    assert slots.running() == 0
