package edge

import (
	"errors"
	"net/http"
	"strings"

	"github.com/spangledb/spangle/node"
)

// DBAdmin removes dbs on an operator's word; *node.Node implements it.
type DBAdmin interface {
	RemoveDB(db string) error
}

// DBAdminHandler serves the operator's removal of a db that the source no
// longer lists, meant for the debug listener behind RequireToken, as
// AdminHandler is:
//
//	DELETE /admin/dbs/<db>   remove db now: 204; 404 if the node has no
//	                         such db, 409 if the source still lists it
//
// A db missing from the source keeps serving until remove_missing_after
// has passed (node.Config.RemoveMissingAfter); this is the deliberate way
// to remove it sooner, one node at a time.
func DBAdminHandler(a DBAdmin) http.Handler {
	return adminHandler(func(w http.ResponseWriter, r *http.Request) {
		db, ok := strings.CutPrefix(r.URL.Path, "/admin/dbs/")
		if !ok || db == "" || strings.Contains(db, "/") {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodDelete {
			w.Header().Set("Allow", "DELETE")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		switch err := a.RemoveDB(db); {
		case err == nil:
			w.WriteHeader(http.StatusNoContent)
		case errors.Is(err, node.ErrUnknownDB):
			http.Error(w, err.Error(), http.StatusNotFound)
		case errors.Is(err, node.ErrDBInSource):
			http.Error(w, err.Error(), http.StatusConflict)
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}
