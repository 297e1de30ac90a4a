// Command fasthttp is the Go fasthttp peer: valyala/fasthttp with the fasthttp/router router,
// GOMAXPROCS=WORKERS, middleware as func(fasthttp.RequestHandler) fasthttp.RequestHandler wrappers and
// errors returned by handlers and rendered in one place.
package main

import (
	"encoding/json"
	"errors"
	"log"
	"strconv"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"peregrine.lab/peers/go/internal/contract"
)

// handlerFunc is a handler that can fail; adapt turns its error into an answer.
type handlerFunc func(ctx *fasthttp.RequestCtx) error

// httpError is an error with the status it should be answered with.
type httpError struct {
	status int
	err    error
}

func (e *httpError) Error() string { return e.err.Error() }

func adapt(h handlerFunc) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		err := h(ctx)
		if err == nil {
			return
		}
		var he *httpError
		if errors.As(err, &he) {
			ctx.Error(fasthttp.StatusMessage(he.status), he.status)
			return
		}
		ctx.ResetBody()
		_ = writeJSON(ctx, fasthttp.StatusInternalServerError, "application/problem+json", contract.InternalError)
	}
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, contentType string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType(contentType)
	ctx.SetBody(body)
	return nil
}

func pathUint(ctx *fasthttp.RequestCtx, name string) (uint64, error) {
	raw, _ := ctx.UserValue(name).(string)
	v, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return 0, &httpError{status: fasthttp.StatusNotFound, err: err}
	}
	return v, nil
}

var hello = []byte("Hello, World!")

func plaintext(ctx *fasthttp.RequestCtx) error {
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBody(hello)
	return nil
}

func jsonHello(ctx *fasthttp.RequestCtx) error {
	return writeJSON(ctx, fasthttp.StatusOK, "application/json", contract.Message{Message: "Hello, World!"})
}

func user(ctx *fasthttp.RequestCtx) error {
	id, err := pathUint(ctx, "id")
	if err != nil {
		return err
	}
	return writeJSON(ctx, fasthttp.StatusOK, "application/json", contract.NewUserByID(id))
}

func search(ctx *fasthttp.RequestCtx) error {
	args := ctx.QueryArgs()
	limit, err := strconv.ParseUint(string(args.Peek("limit")), 10, 64)
	if err != nil || !args.Has("q") {
		return &httpError{status: fasthttp.StatusBadRequest, err: errors.New("q and an integer limit are required")}
	}
	return writeJSON(ctx, fasthttp.StatusOK, "application/json", contract.SearchResult{Q: string(args.Peek("q")), Limit: limit})
}

func createUser(ctx *fasthttp.RequestCtx) error {
	var u contract.NewUser
	if err := json.Unmarshal(ctx.PostBody(), &u); err != nil {
		return &httpError{status: fasthttp.StatusBadRequest, err: err}
	}
	return writeJSON(ctx, fasthttp.StatusCreated, "application/json", u)
}

func member(ctx *fasthttp.RequestCtx) error {
	var m contract.Member
	var err error
	if m.Org, err = pathUint(ctx, "org"); err != nil {
		return err
	}
	if m.Team, err = pathUint(ctx, "team"); err != nil {
		return err
	}
	if m.Member, err = pathUint(ctx, "member"); err != nil {
		return err
	}
	return writeJSON(ctx, fasthttp.StatusOK, "application/json", m)
}

var okBody = []byte("OK")

func ok(ctx *fasthttp.RequestCtx) error {
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBody(okBody)
	return nil
}

func failing(ctx *fasthttp.RequestCtx) error {
	return contract.ErrScenario
}

func large(l *contract.Large) handlerFunc {
	return func(ctx *fasthttp.RequestCtx) error {
		return writeJSON(ctx, fasthttp.StatusOK, "application/json", l)
	}
}

func empty(ctx *fasthttp.RequestCtx) error {
	ctx.SetStatusCode(fasthttp.StatusNoContent)
	return nil
}

// mark is one middleware layer: it sets its own x-mw-N header and calls the next handler.
func mark(header string) func(fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(next fasthttp.RequestHandler) fasthttp.RequestHandler {
		return func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.Set(header, "1")
			next(ctx)
		}
	}
}

func main() {
	contract.SetWorkers()
	r := router.New()
	r.GET("/plaintext", adapt(plaintext))
	r.GET("/json", adapt(jsonHello))
	r.GET("/users/{id}", adapt(user))
	r.POST("/users", adapt(createUser))
	r.GET("/search", adapt(search))
	r.GET("/api/v1/orgs/{org}/teams/{team}/members/{member}", adapt(member))
	stack := adapt(ok)
	for _, h := range []string{"X-Mw-5", "X-Mw-4", "X-Mw-3", "X-Mw-2", "X-Mw-1"} {
		stack = mark(h)(stack)
	}
	r.GET("/middleware", stack)
	r.GET("/error", adapt(failing))
	r.GET("/large", adapt(large(contract.BuildLarge())))
	r.GET("/empty", adapt(empty))
	registerDB(r) // /db /queries /fortunes /updates with DATABASE_URL
	server := &fasthttp.Server{
		Handler: r.Handler,
		// fasthttp sends Server and Date itself; the name is set explicitly for the reports.
		Name: "fasthttp",
	}
	log.Fatal(server.ListenAndServe(contract.Addr()))
}
