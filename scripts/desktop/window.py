#!/usr/bin/python3
"""The desktop tests' window manager stand-in (Debian's python3-xlib):

  window.py close TITLE   asks the top-level window TITLE to close, as a
                          window manager's close button does
                          (WM_PROTOCOLS / WM_DELETE_WINDOW)
  window.py state TITLE   prints "viewable" or "unmapped"
"""

import sys

from Xlib import X, display
from Xlib.protocol import event


def windows(d, title):
    """Every window titled TITLE, top-level first."""
    found, todo = [], [d.screen().root]
    while todo:
        w = todo.pop(0)
        if w.get_wm_name() == title:
            found.append(w)
        todo.extend(w.query_tree().children)
    if not found:
        sys.exit(f"window.py: no window titled {title!r}")
    return found


def main():
    cmd, title = sys.argv[1], sys.argv[2]
    d = display.Display()
    found = windows(d, title)
    if cmd == "close":
        w = found[0]
        protocols = d.intern_atom("WM_PROTOCOLS")
        delete = d.intern_atom("WM_DELETE_WINDOW")
        ev = event.ClientMessage(window=w, client_type=protocols, data=(32, [delete, X.CurrentTime, 0, 0, 0]))
        w.send_event(ev, event_mask=X.NoEventMask)
        d.flush()
    elif cmd == "state":
        viewable = any(w.get_attributes().map_state == X.IsViewable for w in found)
        print("viewable" if viewable else "unmapped")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
