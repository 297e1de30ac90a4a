//! A client-chosen file name reduced to one safe path component, a leaf the part parser uses.

/// The longest name most filesystems accept for one component (`NAME_MAX`).
const NAME_MAX: usize = 255;

/// The client's file name reduced to one safe path component (what `Field::file_name` returns).
pub(super) fn safe_file_name(raw: &str) -> Option<String> {
    let clean: String = raw.chars().filter(|c| !c.is_control()).collect();
    // Both separators: Windows clients send `C:\dir\name`, and either one splits a path there.
    let last = clean.rsplit(['/', '\\']).next().unwrap_or("");
    // `C:name` is relative to drive C's current directory on Windows.
    let last = match last.as_bytes() {
        [d, b':', ..] if d.is_ascii_alphabetic() => &last[2..],
        _ => last,
    };
    // Windows drops trailing dots and spaces (`x.` is `x`, `...` is nothing); `:` names an
    // alternate data stream there.
    let name = last
        .trim_start()
        .trim_end_matches(['.', ' '])
        .replace(':', "_");
    if name.is_empty() {
        return None;
    }
    let mut end = name.len().min(NAME_MAX);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    Some(name[..end].to_owned())
}

#[cfg(test)]
mod tests {
    use super::safe_file_name;

    #[test]
    fn names_are_one_safe_component() {
        let cases = [
            ("report.pdf", Some("report.pdf")),
            ("../x", Some("x")),
            ("../../x", Some("x")),
            ("/etc/x", Some("x")),
            ("C:\\x", Some("x")),
            ("C:x", Some("x")),
            ("c:\\Users\\me\\photo.jpg", Some("photo.jpg")),
            ("a/b", Some("b")),
            ("a\\b", Some("b")),
            ("x\0y", Some("xy")),
            ("x\r\n.txt", Some("x.txt")),
            (".\0.", None),
            ("..", None),
            (".", None),
            ("...", None),
            ("x/..", None),
            ("dir/", None),
            ("", None),
            ("  ", None),
            ("name.  ", Some("name")),
            ("a:b", Some("b")), // drive a:
            ("ab:c", Some("ab_c")),
            (".env", Some(".env")),
            ("ünïcødé.txt", Some("ünïcødé.txt")),
        ];
        for (raw, want) in cases {
            assert_eq!(safe_file_name(raw).as_deref(), want, "{raw:?}");
        }
        let long = "é".repeat(200);
        let name = safe_file_name(&long).unwrap();
        assert!(name.len() <= 255 && name.chars().all(|c| c == 'é'));
    }
}
