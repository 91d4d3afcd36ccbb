//! Closed sets of names: enums whose variants are stored and sent as fixed snake_case strings
//! (ownership states, routes, outcomes, stage statuses). One macro declares each set with its
//! names, so a name is written once and compared as an enum everywhere else.

/// Declares an enum with `as_str`, `parse`, `Display` and `Serialize` (as its name).
macro_rules! names {
    ($(#[$doc:meta])* $vis:vis $name:ident { $($(#[$vdoc:meta])* $variant:ident = $wire:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// Every name, in declaration order.
            #[allow(dead_code)]
            pub const ALL: &[$name] = &[$($name::$variant),+];

            /// The stored and wire name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire),+
                }
            }

            /// The value of a stored or wire name.
            #[allow(dead_code)]
            pub fn parse(s: &str) -> Option<$name> {
                match s {
                    $($wire => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}
pub(crate) use names;
