package main

// The database scenarios: handlers around internal/db, registered only with
// DATABASE_URL set.

import (
	"context"
	"log"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peregrine.lab/peers/go/internal/db"
)

func registerDB(r *router.Router) {
	d, err := db.Open()
	if err != nil {
		log.Fatalf("database: %v", err)
	}
	if d == nil {
		return
	}
	bg := context.Background()
	r.GET("/db", adapt(func(ctx *fasthttp.RequestCtx) error {
		world, err := d.Single(bg)
		if err != nil {
			return err
		}
		return writeJSON(ctx, fasthttp.StatusOK, "application/json", world)
	}))
	r.GET("/queries", adapt(func(ctx *fasthttp.RequestCtx) error {
		worlds, err := d.Queries(bg, db.QueryCount(string(ctx.QueryArgs().Peek("q"))))
		if err != nil {
			return err
		}
		return writeJSON(ctx, fasthttp.StatusOK, "application/json", worlds)
	}))
	r.GET("/updates", adapt(func(ctx *fasthttp.RequestCtx) error {
		worlds, err := d.Updates(bg, db.QueryCount(string(ctx.QueryArgs().Peek("q"))))
		if err != nil {
			return err
		}
		return writeJSON(ctx, fasthttp.StatusOK, "application/json", worlds)
	}))
	r.GET("/fortunes", adapt(func(ctx *fasthttp.RequestCtx) error {
		fortunes, err := d.Fortunes(bg)
		if err != nil {
			return err
		}
		ctx.SetContentType("text/html; charset=utf-8")
		return db.RenderFortunes(ctx, fortunes)
	}))
}
