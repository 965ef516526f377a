//! DSCP values by name (RFC 2474 and the per-hop behaviours that name them).

/// A DSCP written as a number (0..=63) or a name: `ef` (46, RFC 3246), `afXY` (8X + 2Y,
/// RFC 2597), `csN` (8N), `be`/`default` (0), `va` (44, RFC 5865), `le` (1, RFC 8622).
pub fn parse(s: &str) -> Result<u8, String> {
    let t = s.trim().to_ascii_lowercase();
    let why = || format!("`{s}` is not a DSCP: write 0..=63, ef, af11..af43, cs0..cs7, be, va or le");
    let digit = |c: u8, hi: u8| (b'0'..=hi).contains(&c).then(|| c - b'0');
    Ok(match t.as_bytes() {
        b"ef" => 46,
        b"be" | b"default" => 0,
        b"va" => 44,
        b"le" => 1,
        [b'a', b'f', x, y] => {
            let (x, y) = (digit(*x, b'4').ok_or_else(why)?, digit(*y, b'3').ok_or_else(why)?);
            if x == 0 || y == 0 {
                return Err(why());
            }
            8 * x + 2 * y
        }
        [b'c', b's', n] => 8 * digit(*n, b'7').ok_or_else(why)?,
        _ => t.parse::<u8>().ok().filter(|n| *n < 64).ok_or_else(why)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rfcs() {
        for (name, v) in [
            ("ef", 46),
            ("af11", 10),
            ("af43", 38),
            ("AF21", 18),
            ("cs0", 0),
            ("cs7", 56),
            ("be", 0),
            ("va", 44),
            ("le", 1),
            ("63", 63),
        ] {
            assert_eq!(parse(name), Ok(v), "{name}");
        }
        for bad in ["af14", "af50", "af01", "cs8", "64", "x", ""] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
