//! TechEmpower's database rules with no driver in them, shared by the Rust peers' database code
//! (`db.rs` here, and the TechEmpower-leader peers in `../rust-tfb`, which include this file): the
//! statements, `q` parsing, the rows, the new numbers of an update and the fortunes page.

use sailfish::TemplateSimple;
use serde::Serialize;

/// Rows of the World table (ids 1..=10,000).
pub const WORLD_ROWS: i32 = 10_000;

/// One World row by id.
pub const SELECT_WORLD: &str = "SELECT id, randomnumber FROM world WHERE id = $1";
/// Every Fortune row.
pub const SELECT_FORTUNES: &str = "SELECT id, message FROM fortune";
/// One statement per batch; ids sorted so concurrent batches lock rows in the same order.
pub const UPDATE_WORLDS: &str = "UPDATE world SET randomnumber = w.r \
     FROM (SELECT unnest($1::int[]) AS id, unnest($2::int[]) AS r) AS w \
     WHERE world.id = w.id";

/// A World row as the tests answer it.
#[derive(Serialize)]
pub struct World {
    pub id: i32,
    #[serde(rename = "randomNumber")]
    pub random_number: i32,
}

/// A random World id.
pub fn random_id() -> i32 {
    fastrand::i32(1..=WORLD_ROWS)
}

/// `q` of a query string, TechEmpower's way: not a number → 1, then clamped to 1..=500.
pub fn query_count(query: Option<&str>) -> usize {
    query
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("q="))
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(1)
        .clamp(1, 500) as usize
}

/// Gives each of `worlds` a new random number and returns the batch update's parameters (ids,
/// numbers), sorted by id. An id drawn twice gets one value, the last one drawn, in the answer and
/// the database alike.
pub fn renumber(worlds: &mut [World]) -> (Vec<i32>, Vec<i32>) {
    for w in worlds.iter_mut() {
        w.random_number = random_id();
    }
    let mut batch: Vec<(i32, i32)> = worlds.iter().map(|w| (w.id, w.random_number)).collect();
    batch.sort_by_key(|&(id, _)| id);
    // Stable sort, so the last drawn of equal ids ends last; dedup keeps the first, so reverse.
    batch.reverse();
    batch.dedup_by_key(|&mut (id, _)| id);
    batch.reverse();
    for w in worlds.iter_mut() {
        if let Ok(i) = batch.binary_search_by_key(&w.id, |&(id, _)| id) {
            w.random_number = batch[i].1;
        }
    }
    batch.into_iter().unzip()
}

/// A Fortune row.
pub struct Fortune {
    pub id: i32,
    pub message: String,
}

/// `templates/fortunes.stpl`: TechEmpower's table; `<%= %>` HTML-escapes.
#[derive(TemplateSimple)]
#[template(path = "fortunes.stpl")]
struct FortunesPage {
    fortunes: Vec<Fortune>,
}

/// The fortunes page of `fortunes` (the table's rows): one row added at request time, sorted by
/// message, rendered.
pub fn fortunes_page(mut fortunes: Vec<Fortune>) -> Result<String, sailfish::RenderError> {
    fortunes.push(Fortune {
        id: 0,
        message: "Additional fortune added at request time.".to_owned(),
    });
    fortunes.sort_unstable_by(|a, b| a.message.cmp(&b.message));
    FortunesPage { fortunes }.render_once()
}
