"""Node liveness: registration, the heartbeat thread, and removing a frozen lock holder.

Every scheduler process heartbeats its node row (``INSTATIC_HEARTBEAT_INTERVAL``). A group
leader whose node has not heartbeated for longer than the lease (``INSTATIC_LEASE``) is removed
by a follower: it terminates the leader's lock session (so the lock frees and a waiting
follower takes it) and the leader's work sessions (so a frozen transaction cannot block or
commit): found by ``application_name`` on PostgreSQL, by the connection ids each process
records (``coordination.nodesessions``) on MySQL/MariaDB. On PostgreSQL and MySQL one statement
both writes the heartbeat and reads the leaders (and, on MySQL, the groups' wake-up counters),
which keeps an idle replica well under a statement a second.

The leadership row is written by a node after the server granted it the lock, so it can name
someone other than the holder: a follower frozen while it waited in the server is granted a
dead leader's lock and never writes its row. So whenever a group this node follows has no live
leader by its row, the follower also asks the server who holds the group's lock and removes a
holder whose node has no live heartbeat, whatever the row says.

Its modules: ``views`` (nodes, leaders and holders as data, and the decisions over them),
``nodes`` (a node's own row), ``pulse`` (the heartbeat statement), ``sessions`` (ending a
frozen node's sessions, seeing a killed one gone) and ``heartbeat`` (the thread).
"""

from coordination.liveness.heartbeat import (
    DatabaseHealth as DatabaseHealth,
)
from coordination.liveness.heartbeat import (
    Heartbeat as Heartbeat,
)
from coordination.liveness.nodes import (
    NodeNameInUse as NodeNameInUse,
)
from coordination.liveness.nodes import (
    mark_fenced as mark_fenced,
)
from coordination.liveness.nodes import (
    mark_stopped as mark_stopped,
)
from coordination.liveness.nodes import (
    register_node as register_node,
)
from coordination.liveness.pulse import (
    Pulse as Pulse,
)
from coordination.liveness.pulse import (
    pulse as pulse,
)
from coordination.liveness.sessions import (
    VANISH_WAIT as VANISH_WAIT,
)
from coordination.liveness.sessions import (
    VANISH_WAITS as VANISH_WAITS,
)
from coordination.liveness.sessions import (
    LockSessionWaits as LockSessionWaits,
)
from coordination.liveness.sessions import (
    SessionEvidence as SessionEvidence,
)
from coordination.liveness.sessions import (
    Vanished as Vanished,
)
from coordination.liveness.sessions import (
    gone_now as gone_now,
)
from coordination.liveness.sessions import (
    lock_session_waits as lock_session_waits,
)
from coordination.liveness.sessions import (
    terminate_node_work_sessions as terminate_node_work_sessions,
)
from coordination.liveness.sessions import (
    terminate_work_sessions as terminate_work_sessions,
)
from coordination.liveness.sessions import (
    vanish_verdict as vanish_verdict,
)
from coordination.liveness.sessions import (
    vanish_wait as vanish_wait,
)
from coordination.liveness.sessions import (
    vanished_instances as vanished_instances,
)
from coordination.liveness.sessions import (
    work_application_name as work_application_name,
)
from coordination.liveness.views import (
    HolderView as HolderView,
)
from coordination.liveness.views import (
    LeaderView as LeaderView,
)
from coordination.liveness.views import (
    NodeIdentity as NodeIdentity,
)
from coordination.liveness.views import (
    followed_without_live_leader as followed_without_live_leader,
)
from coordination.liveness.views import (
    holder_views as holder_views,
)
