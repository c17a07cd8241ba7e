package edge

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/spangledb/spangle/internal/errtext"
	"github.com/spangledb/spangle/node"
)

// RequireToken guards h, the admin API: with a token, a request must carry
// "Authorization: Bearer <token>" (401 otherwise); without one, h answers
// only when the listener is on loopback (403 otherwise: anyone who reaches
// the listener could pin the node's dbs).
func RequireToken(h http.Handler, token string, loopback bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()[hdrCacheControl] = valNoStore
		switch {
		case token != "":
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="spangle admin"`)
				http.Error(w, "the admin API needs its token ([debug] admin_token)", http.StatusUnauthorized)
				return
			}
		case !loopback:
			http.Error(w, "the admin API answers on a loopback debug listener only, unless [debug] admin_token is set", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// PinAdmin is what the admin API changes; *node.Node implements it.
type PinAdmin interface {
	// CheckPin reports whether Pin(db, p) would take effect (the db
	// served, the version in its source, no pin of the cluster's over
	// it; an unpin needs a pin), changing nothing.
	CheckPin(ctx context.Context, db string, p node.Pin) error
	Pin(db string, p node.Pin) error
	Pins() map[string]node.Pin
}

// AdminHandler serves the admin API, meant for the debug listener (never
// the public one): a single node's pins, the same as spangle activate and
// spangle rollback do through the cluster's versions bucket.
//
//	GET    /admin/pins                      the pins, by db (JSON)
//	PUT    /admin/pins/<db>?version=<v>     pin db to version v
//	PUT    /admin/pins/<db>?version=<v>&force=true  the same, even if the db's guards refuse v
//	PUT    /admin/pins/<db>?before=<v>      pin db to the newest version before v (a rollback)
//	DELETE /admin/pins/<db>                 unpin: back to the newest version
//
// A pin of the cluster's (the versions bucket's) wins over the node's own
// for the same db. What cannot take effect is refused with the reason,
// changing nothing: 404 for a db the node does not serve, or an unpin of
// a db without a pin of the node's own; 409 for a version its source
// does not list (nor this node holds), no version before the one named,
// or a db the cluster pins; 503 when the source cannot be listed.
func AdminHandler(p PinAdmin) http.Handler {
	return adminHandler(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/admin/pins")
		if !ok {
			http.NotFound(w, r)
			return
		}
		if rest == "" || rest == "/" {
			if r.Method != http.MethodGet {
				w.Header().Set("Allow", "GET")
				http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
				return
			}
			b, _ := json.Marshal(p.Pins()) // a map of strings: cannot fail
			w.Header()[hdrContentType] = valJSON
			w.Write(append(b, '\n')) //nolint:errcheck // the client went away
			return
		}
		db := strings.TrimPrefix(rest, "/")
		var pin node.Pin
		switch r.Method {
		case http.MethodPut, http.MethodPost:
			q := r.URL.Query()
			force, err := strconv.ParseBool(cmp.Or(q.Get("force"), "false"))
			if err != nil {
				http.Error(w, "force: want true or false", http.StatusBadRequest)
				return
			}
			pin = node.Pin{Version: q.Get("version"), Before: q.Get("before"), Force: force}
			if pin.IsZero() {
				http.Error(w, "want ?version=<v> or ?before=<v>", http.StatusBadRequest)
				return
			}
		case http.MethodDelete:
		default:
			w.Header().Set("Allow", "PUT, POST, DELETE")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if err := p.CheckPin(r.Context(), db, pin); err != nil {
			http.Error(w, errtext.Strip(err.Error()), pinStatus(err))
			return
		}
		if err := p.Pin(db, pin); err != nil {
			http.Error(w, errtext.Strip(err.Error()), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// pinStatus is the status of a pin CheckPin refused with err.
func pinStatus(err error) int {
	switch {
	case errors.Is(err, node.ErrConfig):
		return http.StatusBadRequest
	case errors.Is(err, node.ErrUnknownDB), errors.Is(err, node.ErrNotPinned):
		return http.StatusNotFound
	case errors.Is(err, node.ErrPinnedVersionMissing), errors.Is(err, node.ErrPinOverridden):
		return http.StatusConflict
	}
	return http.StatusServiceUnavailable // the source could not be listed
}

// adminHandler answers with h, no-store, and a 500 if h panics.
func adminHandler(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				http.Error(w, "internal server error", http.StatusInternalServerError)
			}
		}()
		w.Header()[hdrCacheControl] = valNoStore
		h(w, r)
	})
}
