"""gunicorn's settings for ``deploy/web.sh`` (whose command-line options win over these).

gunicorn's own access and error logs follow ``INSTATIC_LOG_FORMAT`` like Django's: with
``json`` every line it writes is one JSON object from ``instatic.logging.JSONFormatter``, so a
log shipper reads the web container's output as uniformly as the scheduler's. A bad value stops
gunicorn with the same one line as Django's settings.
"""

import os
import sys
from pathlib import Path

# gunicorn loads this file before it puts --chdir on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from instatic.environment import parse_log_format  # noqa: E402
from instatic.logging import gunicorn_logconfig  # noqa: E402

logconfig_dict = gunicorn_logconfig(
    parse_log_format("INSTATIC_LOG_FORMAT", os.environ.get("INSTATIC_LOG_FORMAT"))
)
