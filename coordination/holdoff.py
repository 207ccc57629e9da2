"""Jobs the loop leaves alone for a while, with a pause that doubles while the reason lasts.

A job whose start is refused (its previous run still holds it on another node, or the
scheduler itself failed to start it) must not be planned again at once: the loop would spin.
Nor should a refusal that lasts a moment (an editor's transaction that briefly locks the
publish job's state row) cost a whole tick. So the first pause is short and each refusal in a
row doubles it, up to a cap; a run that starts ends the streak.
"""

import threading
import time

FIRST_PAUSE = 0.05


class HoldOffs:
    def __init__(self):
        self._until: dict[str, float] = {}
        self._pause: dict[str, float] = {}
        self._mutex = threading.Lock()

    def hold(self, name: str, cap: float) -> bool:
        """Pause ``name``; return True when this starts a streak (worth a log line)."""
        with self._mutex:
            previous = self._pause.get(name)
            pause = FIRST_PAUSE if previous is None else min(cap, previous * 2)
            self._pause[name] = pause
            self._until[name] = time.monotonic() + pause
            return previous is None

    def remaining(self, name: str) -> float:
        """Return how many seconds ``name`` is still held (0 when it is not)."""
        return max(0.0, self._until.get(name, 0.0) - time.monotonic())

    def release(self, name: str) -> None:
        """End ``name``'s streak: it started."""
        with self._mutex:
            self._until.pop(name, None)
            self._pause.pop(name, None)

    def held(self) -> dict[str, float]:
        """Return every job still held, with the seconds it is still held."""
        now = time.monotonic()
        with self._mutex:
            until = dict(self._until)
        return {name: left for name, t in until.items() if (left := t - now) > 0}
