//! The benchmark inputs, shared by `benches/parse.rs` and `examples/parse_loop.rs`.

/// A minimal request, as in the TechEmpower plaintext test.
pub const MINIMAL: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: localhost:8080\r\n\r\n";

/// The request wrk sends in the lab's plaintext runs (`wrk http://127.0.0.1:18080/plaintext`):
/// the one the engine's instruction counts are taken with.
pub const WRK: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:18080\r\n\r\n";

/// A typical browser navigation request with 13 header fields.
pub const BROWSER: &[u8] = b"GET /wp-content/uploads/2010/03/hello-kitty-darth-vader-pink.jpg?size=large&v=3 HTTP/1.1\r\n\
Host: www.kittyhell.com\r\n\
Connection: keep-alive\r\n\
sec-ch-ua: \"Chromium\";v=\"124\", \"Google Chrome\";v=\"124\", \"Not-A.Brand\";v=\"99\"\r\n\
sec-ch-ua-mobile: ?0\r\n\
sec-ch-ua-platform: \"macOS\"\r\n\
Upgrade-Insecure-Requests: 1\r\n\
User-Agent: Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36\r\n\
Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8\r\n\
Sec-Fetch-Site: none\r\n\
Sec-Fetch-Mode: navigate\r\n\
Accept-Encoding: gzip, deflate, br, zstd\r\n\
Accept-Language: ja,en-US;q=0.9,en;q=0.8\r\n\
Cookie: wp_ozh_wsa_visits=2; wp_ozh_wsa_visit_lasttime=1715000000; __utma=111111111.2222222222.3333333333.4444444444.5555555555.6; __utmz=111111111.2222222222.1.1.utmccn=(referral)|utmcsr=reader.livedoor.com|utmcct=/reader/|utmcmd=referral\r\n\
\r\n";
