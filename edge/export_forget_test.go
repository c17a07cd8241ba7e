package edge

import (
	"slices"
)

// HandleDBs returns the dbs the HTTP door keeps handles for (metric
// series, cached headers, hot-version pointer), sorted.
func (s *Server) HandleDBs() []string {
	var dbs []string
	if p := s.metrics.dbs.Load(); p != nil {
		for db := range *p {
			dbs = append(dbs, db)
		}
	}
	slices.Sort(dbs)
	return dbs
}

// HeaderDBs returns the dbs the NATS door caches reply headers for,
// sorted.
func (s *NATSServer) HeaderDBs() []string {
	var dbs []string
	s.headers.Range(func(db, _ any) bool {
		dbs = append(dbs, db.(string))
		return true
	})
	slices.Sort(dbs)
	return dbs
}
