module peregrine.lab/peers/go

go 1.26.0

require (
	github.com/fasthttp/router v1.5.4
	github.com/valyala/fasthttp v1.77.0
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/molecule-man/go-brrr v1.3.0 // indirect
	github.com/savsgio/gotils v0.0.0-20240704082632-aef3928b8a38 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
)
