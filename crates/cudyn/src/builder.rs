//! The setters of cudyn's builders (`Program`, `LinkOptions`, the loader's options), written once.

/// Builder setters that store their argument in the field of the same name, wrapped in `Some`
/// when the field is optional (`=> Some`): `setters! { /// Docs. \n debug(on: bool); }`.
macro_rules! setters {
    ($( $(#[$doc:meta])* $field:ident($arg:ident: $ty:ty) $(=> $wrap:ident)?; )*) => {
        $(
            $(#[$doc])*
            pub fn $field(mut self, $arg: $ty) -> Self {
                self.$field = $($wrap)?($arg);
                self
            }
        )*
    };
}
pub(crate) use setters;
