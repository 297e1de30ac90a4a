// Package contract holds what both Go peers share: the environment settings and the typed records
// of the lab's scenario contract (lab/contract/scenarios.json).
package contract

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
)

// Addr is the listen address from ADDR (host:port), defaulting to 127.0.0.1:8080.
func Addr() string {
	if a := os.Getenv("ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:8080"
}

// SetWorkers applies WORKERS (default 1) as GOMAXPROCS, so Go runs as many threads of Go code as
// the other peers run workers.
func SetWorkers() int {
	n := 1
	if raw := os.Getenv("WORKERS"); raw != "" {
		v, err := strconv.Atoi(raw)
		if err != nil || v < 1 {
			fmt.Fprintf(os.Stderr, "WORKERS=%q is not a positive integer\n", raw)
			os.Exit(2)
		}
		n = v
	}
	runtime.GOMAXPROCS(n)
	return n
}

// Message is the body of GET /json.
type Message struct {
	Message string `json:"message"`
}

// UserByID is the body of GET /users/{id}.
type UserByID struct {
	ID   uint64 `json:"id"`
	Name string `json:"name"`
}

// NewUserByID builds the answer for one id.
func NewUserByID(id uint64) UserByID {
	return UserByID{ID: id, Name: "user-" + strconv.FormatUint(id, 10)}
}

// SearchResult is the body of GET /search.
type SearchResult struct {
	Q     string `json:"q"`
	Limit uint64 `json:"limit"`
}

// NewUser is the body of POST /users, echoed back with 201.
type NewUser struct {
	Name  string `json:"name"`
	Email string `json:"email"`
	Age   uint32 `json:"age"`
}

// Member is the body of GET /api/v1/orgs/{org}/teams/{team}/members/{member}.
type Member struct {
	Org    uint64 `json:"org"`
	Team   uint64 `json:"team"`
	Member uint64 `json:"member"`
}

// Problem is an RFC 9457 problem details body, the answer of the error scenario.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
}

// InternalError is the problem the error scenario answers with.
var InternalError = Problem{Type: "about:blank", Title: "Internal Server Error", Status: 500}

// Item is one element of the large_json payload.
type Item struct {
	ID     uint32   `json:"id"`
	Name   string   `json:"name"`
	Active bool     `json:"active"`
	Score  uint32   `json:"score"`
	Tags   []string `json:"tags"`
}

// Large is the large_json payload (~10 KiB serialised).
type Large struct {
	Items []Item `json:"items"`
}

// BuildLarge builds the large_json data structure once at startup; handlers serialise it per
// request, as the contract asks (no pre-encoded string).
func BuildLarge() *Large {
	l := &Large{Items: make([]Item, 0, 134)}
	for id := uint32(0); id < 134; id++ {
		l.Items = append(l.Items, Item{
			ID:     id,
			Name:   "item-" + strconv.FormatUint(uint64(id), 10),
			Active: id%2 == 0,
			Score:  (id * 7) % 100,
			Tags:   []string{"alpha", "beta"},
		})
	}
	return l
}

// ErrScenario is the error the error scenario's handler fails with.
var ErrScenario = fmt.Errorf("the error scenario always fails")
