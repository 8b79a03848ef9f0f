#!/usr/bin/python3
"""The desktop tests' side of the tray (Debian's python3-gi, no pip):

  sni.py watcher FILE   a minimal org.kde.StatusNotifierWatcher (what a
                        desktop's panel runs); each item that registers is
                        appended to FILE as "BUS_NAME OBJECT_PATH"
  sni.py notifications FILE  a minimal org.freedesktop.Notifications server;
                             each notification is appended to FILE as
                             "SUMMARY<TAB>BODY"
  sni.py menu NAME PATH      the item's menu (com.canonical.dbusmenu), as JSON
                             lines {"id", "label", "enabled", "toggle_state"}
  sni.py click NAME PATH LABEL   sends the "clicked" event to the entry LABEL
  sni.py props NAME PATH     the item's Status and IconPixmap digest, as JSON
"""

import hashlib
import json
import sys

from gi.repository import Gio, GLib

WATCHER_XML = """
<node><interface name="org.kde.StatusNotifierWatcher">
  <method name="RegisterStatusNotifierItem"><arg type="s" direction="in"/></method>
  <method name="RegisterStatusNotifierHost"><arg type="s" direction="in"/></method>
  <property name="RegisteredStatusNotifierItems" type="as" access="read"/>
  <property name="IsStatusNotifierHostRegistered" type="b" access="read"/>
  <property name="ProtocolVersion" type="i" access="read"/>
  <signal name="StatusNotifierItemRegistered"><arg type="s"/></signal>
  <signal name="StatusNotifierItemUnregistered"><arg type="s"/></signal>
  <signal name="StatusNotifierHostRegistered"/>
</interface></node>
"""


def watcher(out_path):
    items = []

    def on_call(conn, sender, path, iface, method, params, invocation):
        if method == "RegisterStatusNotifierItem":
            arg = params.unpack()[0]
            name, obj = (sender, arg) if arg.startswith("/") else (arg, "/StatusNotifierItem")
            items.append(f"{name}{obj}")
            with open(out_path, "a") as f:
                f.write(f"{name} {obj}\n")
            conn.emit_signal(None, path, iface, "StatusNotifierItemRegistered",
                             GLib.Variant("(s)", (f"{name}{obj}",)))
        invocation.return_value(None)

    def on_get(conn, sender, path, iface, prop):
        return {
            "RegisteredStatusNotifierItems": GLib.Variant("as", items),
            "IsStatusNotifierHostRegistered": GLib.Variant("b", True),
            "ProtocolVersion": GLib.Variant("i", 0),
        }[prop]

    serve("org.kde.StatusNotifierWatcher", "/StatusNotifierWatcher", WATCHER_XML, on_call, on_get)


NOTIFICATIONS_XML = """
<node><interface name="org.freedesktop.Notifications">
  <method name="Notify">
    <arg type="s" direction="in"/><arg type="u" direction="in"/><arg type="s" direction="in"/>
    <arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="as" direction="in"/>
    <arg type="a{sv}" direction="in"/><arg type="i" direction="in"/><arg type="u" direction="out"/>
  </method>
  <method name="GetCapabilities"><arg type="as" direction="out"/></method>
  <method name="GetServerInformation">
    <arg type="s" direction="out"/><arg type="s" direction="out"/>
    <arg type="s" direction="out"/><arg type="s" direction="out"/>
  </method>
  <method name="CloseNotification"><arg type="u" direction="in"/></method>
</interface></node>
"""


def serve(name, path, xml, on_call, on_get=None):
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    info = Gio.DBusNodeInfo.new_for_xml(xml).interfaces[0]
    bus.register_object(path, info, on_call, on_get, None)
    loop = GLib.MainLoop()

    def lost(*_):
        print(f"sni.py: could not own {name}", file=sys.stderr, flush=True)
        loop.quit()

    Gio.bus_own_name_on_connection(bus, name, Gio.BusNameOwnerFlags.NONE,
                                   lambda *_: print(f"sni.py: {name} ready", flush=True), lost)
    loop.run()
    sys.exit(1)


def notifications(out_path):
    count = [0]

    def on_call(conn, sender, path, iface, method, params, invocation):
        if method == "Notify":
            args = params.unpack()
            with open(out_path, "a") as f:
                f.write(f"{args[3]}\t{args[4]}\n")
            count[0] += 1
            invocation.return_value(GLib.Variant("(u)", (count[0],)))
        elif method == "GetCapabilities":
            invocation.return_value(GLib.Variant("(as)", (["body"],)))
        elif method == "GetServerInformation":
            invocation.return_value(GLib.Variant("(ssss)", ("sni.py", "mlxr tests", "0", "1.2")))
        else:
            invocation.return_value(None)

    serve("org.freedesktop.Notifications", "/org/freedesktop/Notifications", NOTIFICATIONS_XML, on_call)


def call(name, path, iface, method, args, reply):
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    result = bus.call_sync(name, path, iface, method, args, GLib.VariantType(reply) if reply else None,
                           Gio.DBusCallFlags.NONE, 10000, None)
    return result.unpack() if result is not None else None


def item_prop(name, path, prop):
    return call(name, path, "org.freedesktop.DBus.Properties", "Get",
                GLib.Variant("(ss)", ("org.kde.StatusNotifierItem", prop)), "(v)")[0]


def menu_entries(name, path):
    menu = item_prop(name, path, "Menu")
    try:
        call(name, menu, "com.canonical.dbusmenu", "AboutToShow", GLib.Variant("(i)", (0,)), "(b)")
    except GLib.Error:
        pass
    _, layout = call(name, menu, "com.canonical.dbusmenu", "GetLayout",
                     GLib.Variant("(iias)", (0, -1, [])), "(u(ia{sv}av))")
    entries = []

    def walk(node):
        ident, props, children = node
        if ident != 0 and props.get("type") != "separator":
            entries.append({
                "id": ident,
                "label": props.get("label", "").replace("_", ""),
                "enabled": props.get("enabled", True),
                "visible": props.get("visible", True),
                "toggle_state": props.get("toggle-state"),
            })
        for child in children:
            walk(child)

    walk(layout)
    return menu, entries


def main():
    cmd = sys.argv[1]
    if cmd == "watcher":
        watcher(sys.argv[2])
    elif cmd == "notifications":
        notifications(sys.argv[2])
    elif cmd == "menu":
        for e in menu_entries(sys.argv[2], sys.argv[3])[1]:
            print(json.dumps(e, ensure_ascii=False))
    elif cmd == "click":
        name, path, label = sys.argv[2:5]
        menu, entries = menu_entries(name, path)
        match = [e for e in entries if e["label"] == label]
        if not match:
            sys.exit(f"sni.py: no menu entry '{label}' in {[e['label'] for e in entries]}")
        try:
            call(name, menu, "com.canonical.dbusmenu", "Event",
                 GLib.Variant("(isvu)", (match[0]["id"], "clicked", GLib.Variant("s", ""), 0)), None)
        except GLib.Error as e:
            # Quit can end the app before its menu answers; the caller
            # checks what the click did in any case.
            if "org.freedesktop.DBus.Error.NoReply" not in e.message:
                raise
            print(f"sni.py: '{label}' clicked; the app left the bus before answering", file=sys.stderr)
    elif cmd == "props":
        name, path = sys.argv[2:4]
        out = {"status": item_prop(name, path, "Status")}
        for prop in ("IconName", "IconThemePath"):
            try:
                out[prop] = item_prop(name, path, prop)
            except GLib.Error:
                out[prop] = None
        # Ayatana names the icon by its file (tray-icon writes a PNG a state).
        icon = out.get("IconName") or ""
        if icon and not icon.startswith("/"):
            icon = f"{out.get('IconThemePath') or ''}/{icon}.png"
        try:
            out["icon_sha"] = hashlib.sha256(open(icon, "rb").read()).hexdigest()[:16]
            out["icon_file"] = icon
        except OSError as e:
            sys.exit(f"sni.py: cannot read the item's icon {icon!r}: {e}")
        print(json.dumps(out))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
