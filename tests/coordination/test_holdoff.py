"""Hold-offs: a refused job waits a moment, then longer while refusals go on, never forever."""

from coordination.holdoff import FIRST_PAUSE, HoldOffs


def test_the_pause_doubles_while_refusals_go_on_up_to_the_cap_and_ends_on_release():
    holds = HoldOffs()
    assert holds.remaining("job") == 0
    assert holds.hold("job", cap=1.0) is True, "the first refusal starts a streak"
    assert 0 < holds.remaining("job") <= FIRST_PAUSE
    assert holds.hold("job", cap=1.0) is False
    assert FIRST_PAUSE < holds.remaining("job") <= 2 * FIRST_PAUSE
    for _ in range(10):
        holds.hold("job", cap=1.0)
    assert 0.5 < holds.remaining("job") <= 1.0, "capped"
    assert holds.remaining("other") == 0
    holds.release("job")
    assert holds.remaining("job") == 0
    assert holds.hold("job", cap=1.0) is True, "a new streak starts short again"
