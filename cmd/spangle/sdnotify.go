package main

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/spangledb/spangle"
	"github.com/spangledb/spangle/node"
)

// sdNotifier speaks systemd's notify protocol for a Type=notify unit
// (examples/deploy/spangle.service): a datagram to the socket named by
// $NOTIFY_SOCKET, which systemd sets. Without the variable every call does
// nothing. It is used by serve's goroutine only.
type sdNotifier struct {
	log *slog.Logger
	// ready: READY=1 was sent. Until then systemd waits for the first
	// READY=1 (the unit is "activating"), and a SIGHUP sends nothing.
	ready bool
}

// send writes one notification; a failure is logged, never fatal: the
// node serves whether or not systemd hears of it.
func (n *sdNotifier) send(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		n.log.Warn("sd_notify failed", "state", state, "err", err)
	}
}

// loaded sends READY=1 once the node's initial load is done (node.Loaded:
// every db of the first listing built, reused or failed), with a STATUS
// line for systemctl status.
func (n *sdNotifier) loaded(s *spangle.Server) {
	n.ready = true
	n.send(daemon.SdNotifyReady + "\nSTATUS=" + statusLine(s.Node().Status(), s.Node().Name()))
}

// reloading surrounds a SIGHUP's refresh (s.Refresh): RELOADING=1, then
// READY=1 with the STATUS line. The refresh it starts (listing the source,
// building new versions) goes on in the background, as SIGHUP always did;
// systemctl reload returns once the node has asked for it.
func (n *sdNotifier) reloading(s *spangle.Server) {
	if !n.ready {
		s.Refresh()
		return
	}
	n.send(daemon.SdNotifyReloading)
	s.Refresh()
	n.send(daemon.SdNotifyReady + "\nSTATUS=" + statusLine(s.Node().Status(), s.Node().Name()))
}

// stopping sends STOPPING=1 before the shutdown starts.
func (n *sdNotifier) stopping() { n.send(daemon.SdNotifyStopping + "\nSTATUS=shutting down") }

// statusLine sums the status up for systemd on one line: the dbs this
// node (self) serves an active version of, and why the source's last
// listing failed if it did.
func statusLine(st node.Status, self string) string {
	active := 0
	for _, d := range st.DBs {
		for _, v := range d.Versions {
			if v.Nodes[self].Current {
				active++
				break
			}
		}
	}
	line := fmt.Sprintf("serving %d of %d dbs", active, len(st.DBs))
	if st.SourceError != "" {
		line += "; source: " + strings.Join(strings.Fields(st.SourceError), " ")
	}
	return line
}
