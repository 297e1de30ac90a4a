// Package db holds the database scenarios (lab/contract/db.json, TechEmpower's rules) for the Go
// peers: pgx v5 with a pgxpool of DB_POOL connections, statements prepared and cached per
// connection (pgx's default exec mode), the N reads of one request pipelined in one pgx.Batch,
// html/template for the fortunes page. Each server keeps its own routing and error path.
package db

import (
	"context"
	"html/template"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const worldRows = 10000

const (
	selectWorld    = "SELECT id, randomnumber FROM world WHERE id = $1"
	selectFortunes = "SELECT id, message FROM fortune"
	// One statement per batch; ids sorted so concurrent batches lock rows in the same order.
	updateWorlds = "UPDATE world SET randomnumber = w.r " +
		"FROM (SELECT unnest($1::int[]) AS id, unnest($2::int[]) AS r) AS w WHERE world.id = w.id"
)

// World is one row of the World table as the scenarios answer it.
type World struct {
	ID           int32 `json:"id"`
	RandomNumber int32 `json:"randomNumber"`
}

// Fortune is one row of the Fortune table.
type Fortune struct {
	ID      int32
	Message string
}

// DB is the server's pool.
type DB struct{ pool *pgxpool.Pool }

// Open connects to DATABASE_URL with DB_POOL connections (default 8); nil, nil without a URL.
func Open() (*DB, error) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		return nil, nil
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	size := int32(8)
	if n, err := strconv.Atoi(os.Getenv("DB_POOL")); err == nil && n > 0 {
		size = int32(n)
	}
	cfg.MaxConns, cfg.MinConns = size, size
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	return &DB{pool: pool}, nil
}

func randomID() int32 { return rand.Int32N(worldRows) + 1 }

// QueryCount is q of a query string, TechEmpower's way: not a number → 1, clamped to 1..500.
func QueryCount(raw string) int {
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		return 1
	}
	if n > 500 {
		return 500
	}
	return n
}

// Single is /db.
func (d *DB) Single(ctx context.Context) (World, error) {
	var w World
	err := d.pool.QueryRow(ctx, selectWorld, randomID()).Scan(&w.ID, &w.RandomNumber)
	return w, err
}

// read sends n reads in one pipelined batch on conn.
func read(ctx context.Context, conn *pgxpool.Conn, n int) ([]World, error) {
	batch := &pgx.Batch{}
	for i := 0; i < n; i++ {
		batch.Queue(selectWorld, randomID())
	}
	res := conn.SendBatch(ctx, batch)
	worlds := make([]World, n)
	for i := range worlds {
		if err := res.QueryRow().Scan(&worlds[i].ID, &worlds[i].RandomNumber); err != nil {
			res.Close()
			return nil, err
		}
	}
	return worlds, res.Close()
}

// Queries is /queries?q=N.
func (d *DB) Queries(ctx context.Context, n int) ([]World, error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	return read(ctx, conn, n)
}

// Updates is /updates?q=N: N pipelined reads, new numbers, one batch update.
func (d *DB) Updates(ctx context.Context, n int) ([]World, error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	worlds, err := read(ctx, conn, n)
	if err != nil {
		return nil, err
	}
	// One id drawn twice gets one value: the last one drawn, in the answer and the database.
	latest := make(map[int32]int32, n)
	for i := range worlds {
		worlds[i].RandomNumber = randomID()
		latest[worlds[i].ID] = worlds[i].RandomNumber
	}
	ids := make([]int32, 0, len(latest))
	for id := range latest {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	nums := make([]int32, len(ids))
	for i, id := range ids {
		nums[i] = latest[id]
	}
	for i := range worlds {
		worlds[i].RandomNumber = latest[worlds[i].ID]
	}
	if _, err := conn.Exec(ctx, updateWorlds, ids, nums); err != nil {
		return nil, err
	}
	return worlds, nil
}

// Fortunes is /fortunes: every row plus one added at request time, sorted by message.
func (d *DB) Fortunes(ctx context.Context) ([]Fortune, error) {
	rows, err := d.pool.Query(ctx, selectFortunes)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	fortunes := make([]Fortune, 0, 16)
	for rows.Next() {
		var f Fortune
		if err := rows.Scan(&f.ID, &f.Message); err != nil {
			return nil, err
		}
		fortunes = append(fortunes, f)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	fortunes = append(fortunes, Fortune{ID: 0, Message: "Additional fortune added at request time."})
	sort.Slice(fortunes, func(a, b int) bool { return fortunes[a].Message < fortunes[b].Message })
	return fortunes, nil
}

// page is TechEmpower's fortunes table; html/template escapes every message.
var page = template.Must(template.New("fortunes").Parse(strings.Join([]string{
	"<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>",
	"<tr><th>id</th><th>message</th></tr>",
	"{{range .}}<tr><td>{{.ID}}</td><td>{{.Message}}</td></tr>{{end}}",
	"</table></body></html>",
}, "")))

// RenderFortunes writes the page.
func RenderFortunes(w io.Writer, fortunes []Fortune) error { return page.Execute(w, fortunes) }
