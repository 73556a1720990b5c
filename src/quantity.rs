//! Human-friendly quantities on the command line and in `config.toml`.
//!
//! Crawl sizes are written the way operators think of them: `1e8`, `100000000`,
//! `100_000_000` or `100M` are the same URL count, and memory is `256MiB` or `1GiB`.
//! Both parsers are strict: anything that is not exactly an accepted form is refused
//! with a message that lists the accepted forms, because a silently misread `1e9`
//! would size a filter ten times too small.

use std::fmt;

/// Why a quantity could not be read; the message lists the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("{input:?} is not a count; write it as 100000000, 100_000_000, 1e8 or 100M (suffixes K, M, G, T)")]
    BadCount { input: String },
    #[error("{input:?} is not a size; write it as 268435456, 256MiB, 1GiB, 512MB or 64KiB")]
    BadSize { input: String },
    #[error("{input:?} is too large")]
    TooLarge { input: String },
}

/// Parses a count such as `1e8`, `100000000`, `100_000_000`, `100M` or `2.5K`.
///
/// The value must be a whole number once scaled: `1.5` is refused, `1.5K` is 1500.
pub fn parse_count(input: &str) -> Result<u64, QuantityError> {
    let bad = || QuantityError::BadCount {
        input: input.to_string(),
    };
    let text = input.trim();
    if text.is_empty() || text.starts_with('_') || text.ends_with('_') || text.contains("__") {
        return Err(bad());
    }
    let cleaned: String = text.chars().filter(|&c| c != '_').collect();
    let (number, multiplier) = match cleaned.chars().last() {
        Some(c) if c.is_ascii_alphabetic() && c != 'e' && c != 'E' => {
            let mult: u64 = match c.to_ascii_uppercase() {
                'K' => 1_000,
                'M' => 1_000_000,
                'G' | 'B' => 1_000_000_000,
                'T' => 1_000_000_000_000,
                _ => return Err(bad()),
            };
            (&cleaned[..cleaned.len() - 1], mult)
        }
        _ => (cleaned.as_str(), 1),
    };
    if number.is_empty() {
        return Err(bad());
    }
    if number.bytes().all(|b| b.is_ascii_digit()) {
        let value: u64 = number.parse().map_err(|_| QuantityError::TooLarge {
            input: input.to_string(),
        })?;
        return value
            .checked_mul(multiplier)
            .ok_or_else(|| QuantityError::TooLarge {
                input: input.to_string(),
            });
    }
    // Decimal or scientific notation: only digits, one '.', one exponent.
    if !number
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        || !number.as_bytes()[0].is_ascii_digit()
    {
        return Err(bad());
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    let scaled = value * multiplier as f64;
    if !scaled.is_finite() || scaled < 0.0 {
        return Err(bad());
    }
    if scaled >= u64::MAX as f64 {
        return Err(QuantityError::TooLarge {
            input: input.to_string(),
        });
    }
    if scaled.fract() != 0.0 {
        return Err(bad());
    }
    Ok(scaled as u64)
}

/// Parses a byte size: a plain number of bytes, or a number with a unit.
///
/// Binary units (`KiB`, `MiB`, `GiB`, `TiB`) are powers of 1024; decimal units
/// (`KB`, `MB`, `GB`, `TB`) are powers of 1000; `K`, `M`, `G` alone are binary,
/// as in most operators' habits (`-Xmx1G`). Case and a space before the unit are
/// accepted.
pub fn parse_byte_size(input: &str) -> Result<u64, QuantityError> {
    let bad = || QuantityError::BadSize {
        input: input.to_string(),
    };
    let text = input.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: String = number.chars().filter(|&c| c != '_').collect();
    if number.is_empty() || number.starts_with('.') {
        return Err(bad());
    }
    let unit = unit.trim();
    let multiplier: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(bad()),
    };
    let value: f64 = number.parse().map_err(|_| bad())?;
    let bytes = value * multiplier as f64;
    if !bytes.is_finite() {
        return Err(bad());
    }
    if bytes >= u64::MAX as f64 {
        return Err(QuantityError::TooLarge {
            input: input.to_string(),
        });
    }
    Ok(bytes.round() as u64)
}

/// A byte count shown the way a person reads it: `171.4 MiB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanBytes(pub u64);

impl fmt::Display for HumanBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
        let bytes = self.0;
        if bytes < 1024 {
            return write!(f, "{bytes} B");
        }
        let mut value = bytes as f64 / 1024.0;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < UNITS.len() {
            value /= 1024.0;
            unit += 1;
        }
        write!(f, "{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_in_every_documented_form() {
        for form in [
            "1e8",
            "100000000",
            "100_000_000",
            "100M",
            "100m",
            "1E8",
            "0.1G",
        ] {
            assert_eq!(parse_count(form), Ok(100_000_000), "{form}");
        }
        assert_eq!(parse_count("2.5K"), Ok(2_500));
        assert_eq!(parse_count("30000"), Ok(30_000));
        assert_eq!(parse_count("0"), Ok(0));
    }

    #[test]
    fn counts_refuse_everything_else() {
        for form in [
            "", "M", "1.5", "-5", "1e", "abc", "10X", "_1", "1__0", "1e8.5", "1 000", "e8", "1e-3",
            "+5",
        ] {
            assert!(parse_count(form).is_err(), "{form:?} should be refused");
        }
        let msg = parse_count("ten").unwrap_err().to_string();
        assert!(msg.contains("1e8") && msg.contains("100M"), "{msg}");
        assert!(matches!(
            parse_count("1e30"),
            Err(QuantityError::TooLarge { .. })
        ));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_byte_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_byte_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_byte_size("1 GiB"), Ok(1 << 30));
        assert_eq!(parse_byte_size("1G"), Ok(1 << 30));
        assert_eq!(parse_byte_size("512MB"), Ok(512_000_000));
        assert_eq!(parse_byte_size("1.5KiB"), Ok(1536));
        assert_eq!(parse_byte_size("4096"), Ok(4096));
        for bad in ["", "MiB", "12 parsecs", "-1MiB", ".5G", "1..2M"] {
            assert!(parse_byte_size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn human_bytes() {
        assert_eq!(HumanBytes(512).to_string(), "512 B");
        assert_eq!(HumanBytes(179_705_175).to_string(), "171.4 MiB");
        assert_eq!(HumanBytes(1 << 30).to_string(), "1.0 GiB");
    }
}
