//! Decimal digits without the formatting machinery: for text built at compile time, where
//! nothing can be formatted, and on the path of a warm start, where the formatting code would be
//! run for the first time in the process (which is most of what a compile-cache hit costs there).

/// A number's decimal digits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decimal {
    digits: [u8; 20],
    start: usize,
}

impl Decimal {
    /// The digits of `value`.
    pub(crate) const fn of(value: u64) -> Decimal {
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        let mut rest = value;
        loop {
            start -= 1;
            digits[start] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        Decimal { digits, start }
    }

    /// The digits as text.
    pub(crate) const fn as_str(&self) -> &str {
        match core::str::from_utf8(self.digits.split_at(self.start).1) {
            Ok(text) => text,
            // Only ASCII digits are ever written.
            Err(_) => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Decimal;

    #[test]
    fn digits_are_what_display_writes() {
        for value in [0, 7, 10, 90, 121, 4_294_967_295, u64::MAX] {
            assert_eq!(Decimal::of(value).as_str(), value.to_string());
        }
    }
}
