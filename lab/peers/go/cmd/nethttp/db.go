package main

// The database scenarios: handlers around internal/db, registered only with
// DATABASE_URL set.

import (
	"bytes"
	"log"
	"net/http"
	"strconv"

	"peregrine.lab/peers/go/internal/db"
)

func registerDB(mux *http.ServeMux) {
	d, err := db.Open()
	if err != nil {
		log.Fatalf("database: %v", err)
	}
	if d == nil {
		return
	}
	mux.Handle("GET /db", handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		world, err := d.Single(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, "application/json", world)
	}))
	mux.Handle("GET /queries", handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		worlds, err := d.Queries(r.Context(), db.QueryCount(r.URL.Query().Get("q")))
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, "application/json", worlds)
	}))
	mux.Handle("GET /updates", handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		worlds, err := d.Updates(r.Context(), db.QueryCount(r.URL.Query().Get("q")))
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, "application/json", worlds)
	}))
	mux.Handle("GET /fortunes", handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		fortunes, err := d.Fortunes(r.Context())
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := db.RenderFortunes(&buf, fortunes); err != nil {
			return err
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(buf.Len()))
		_, err = w.Write(buf.Bytes())
		return err
	}))
}
