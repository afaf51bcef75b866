//! `#[derive(DeviceRepr)]` for [cudyn](https://docs.rs/cudyn): use it through cudyn
//! (`#[derive(cudyn::DeviceRepr)]`), whose `derive` feature (on by default) re-exports it next to
//! the trait of the same name. The rules it enforces are documented on the trait.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Error, Fields, Path};

/// Implements `cudyn::DeviceRepr` for a `#[repr(C)]` or `#[repr(transparent)]` struct whose
/// fields are all `DeviceRepr` and which has no padding, and refuses anything else at compile
/// time (see the trait's documentation).
///
/// `#[cudyn(c_name = "Odd")]` names the C type the struct stands for, so that a launch refuses it
/// for a parameter of another struct type even of the same size (without it, a struct passes any
/// parameter of its size and offset). `#[cudyn(crate = "path::to::cudyn")]` names the cudyn
/// crate where it is not `::cudyn` (a renamed dependency or a re-export).
///
/// `#[cudyn(padded)]` accepts a struct with padding: instead of `DeviceRepr` it implements
/// `cudyn::Pack`, whose `pack()` is the struct's bytes with the padding zeroed, a `DeviceRepr`
/// value to pass or store.
#[proc_macro_derive(DeviceRepr, attributes(cudyn))]
pub fn derive_device_repr(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    let input = syn::parse_macro_input!(input as DeriveInput);
    device_repr(&input)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

fn device_repr(input: &DeriveInput) -> syn::Result<TokenStream> {
    let Attributes {
        cudyn,
        c_name,
        padded,
    } = attributes(input)?;
    let fields = struct_fields(input)?;
    check_repr(input)?;
    if let Some(param) = input.generics.params.first() {
        return Err(Error::new_spanned(
            param,
            "#[derive(DeviceRepr)] does not accept generic parameters: whether a generic struct \
             has padding depends on its arguments, which the derive cannot check; derive it on a \
             struct of concrete types (one per instance you need)",
        ));
    }

    let name = &input.ident;
    let type_name = name.to_string();
    // Spanned at each field's type, so that a field that is not DeviceRepr is the one underlined.
    let field_checks = fields.iter().map(|field| {
        let ty = &field.ty;
        quote_spanned! {ty.span()=>
            #cudyn::memory::derive_support::assert_device_repr::<#ty>();
        }
    });
    // Each field must start where the previous one ends, and the struct end where the last one
    // does: one check per field, spanned at it, so that padding is reported where it lies.
    let mut end_of_previous = quote!(0);
    let mut gap_checks = Vec::new();
    let mut last_label = String::new();
    for (index, field) in fields.iter().enumerate() {
        let member = match &field.ident {
            Some(ident) => syn::Member::Named(ident.clone()),
            None => syn::Member::Unnamed(index.into()),
        };
        let label = quote!(#member).to_string();
        let offset = quote!(::core::mem::offset_of!(#name, #member));
        // The error points at the call, whose span starts with the crate path's.
        let cudyn = respan(&cudyn, field.span());
        gap_checks.push(quote_spanned! {field.span()=>
            const _: () = #cudyn::memory::derive_support::assert_field_follows(
                #type_name, #label, #end_of_previous, #offset,
            );
        });
        let ty = &field.ty;
        end_of_previous = quote!(#offset + ::core::mem::size_of::<#ty>());
        last_label = label;
    }
    let c_type = c_name.map(|c_name| {
        quote! { const C_TYPE: #cudyn::ArgType = #cudyn::ArgType::Named(#c_name); }
    });
    if padded {
        return Ok(packed(&cudyn, name, &fields, c_type));
    }
    let tail_cudyn = respan(&cudyn, name.span());
    let tail_check = quote_spanned! {name.span()=>
        const _: () = #tail_cudyn::memory::derive_support::assert_no_tail_padding(
            #type_name, #last_label, #end_of_previous, ::core::mem::size_of::<#name>(),
        );
    };
    Ok(quote! {
        // Evaluated when the struct is compiled: a field that is not DeviceRepr or a padding
        // byte is a compile error.
        const _: () = {
            #(#field_checks)*
        };
        #(#gap_checks)*
        #tail_check
        // SAFETY: checked above when this compiles: #[repr(C)] or #[repr(transparent)] (checked
        // by the derive), every field DeviceRepr (so plain data with every bit pattern valid) and
        // no padding byte between or after the fields.
        unsafe impl #cudyn::DeviceRepr for #name {
            #c_type
        }
    })
}

/// For `#[cudyn(padded)]`: `Pack` for the struct, whose `Packed` is a byte array of its size
/// and alignment with each field written at its offset and the padding zero.
fn packed(
    cudyn: &Path,
    name: &syn::Ident,
    fields: &[&syn::Field],
    c_type: Option<TokenStream>,
) -> TokenStream {
    let field_checks = fields.iter().map(|field| {
        let ty = &field.ty;
        quote_spanned! {ty.span()=>
            #cudyn::memory::derive_support::assert_device_repr::<#ty>();
        }
    });
    let writes = fields.iter().enumerate().map(|(index, field)| {
        let member = match &field.ident {
            Some(ident) => syn::Member::Named(ident.clone()),
            None => syn::Member::Unnamed(index.into()),
        };
        quote! {
            #cudyn::memory::derive_support::write_field(
                &self.#member,
                &mut packed.bytes,
                ::core::mem::offset_of!(#name, #member),
            );
        }
    });
    quote! {
        const _: () = {
            #(#field_checks)*
        };
        const _: () = {
            /// The struct's bytes, its padding zero: aligned as the struct by a field of no size.
            #[derive(Clone, Copy)]
            #[repr(C)]
            pub struct Packed {
                _align: [#name; 0],
                bytes: [u8; ::core::mem::size_of::<#name>()],
            }
            // SAFETY: bytes only (the empty array has no bytes, only the struct's alignment, and
            // the size is a multiple of it), so no padding and every bit pattern valid; it
            // stands for the struct it packs.
            unsafe impl #cudyn::DeviceRepr for Packed {
                #c_type
            }
            // SAFETY: `Packed` has the struct's size and alignment, and `pack` writes each field
            // at its offset into zeroed bytes.
            unsafe impl #cudyn::Pack for #name {
                type Packed = Packed;
                fn pack(&self) -> Packed {
                    let mut packed = Packed {
                        _align: [],
                        bytes: [0; ::core::mem::size_of::<#name>()],
                    };
                    #(#writes)*
                    packed
                }
            }
        };
    }
}

/// `tokens` with every span set to `span`.
fn respan(tokens: &impl ToTokens, span: Span) -> TokenStream {
    tokens
        .to_token_stream()
        .into_iter()
        .map(|mut tree| {
            tree.set_span(span);
            tree
        })
        .collect()
}

/// The fields of a struct with at least one field; anything else is an error saying why.
fn struct_fields(input: &DeriveInput) -> syn::Result<Vec<&syn::Field>> {
    let refuse = |span: Span, what: &str| {
        Err(Error::new(
            span,
            format!(
                "#[derive(DeviceRepr)] accepts only structs with fields, not {what}: a kernel \
                 parameter or buffer element of a C struct type is a #[repr(C)] struct field for \
                 field"
            ),
        ))
    };
    let data =
        match &input.data {
            Data::Struct(data) => data,
            Data::Enum(data) => return refuse(
                data.enum_token.span,
                "an enum (not every bit pattern is one of its variants; pass its integer instead)",
            ),
            Data::Union(data) => {
                return refuse(
                    data.union_token.span,
                    "a union (its bytes beyond the active field are not initialized)",
                )
            }
        };
    let fields: Vec<_> = match &data.fields {
        Fields::Named(fields) => fields.named.iter().collect(),
        Fields::Unnamed(fields) => fields.unnamed.iter().collect(),
        Fields::Unit => Vec::new(),
    };
    if fields.is_empty() {
        return refuse(
            input.ident.span(),
            "a struct without fields (its size is 0 in Rust but 1 in C++)",
        );
    }
    Ok(fields)
}

/// Accepts `#[repr(C)]` (with `align`/`packed` or not) and `#[repr(transparent)]`: the layouts
/// that C and CUDA C++ share. A Rust-layout struct may order its fields any way.
fn check_repr(input: &DeriveInput) -> syn::Result<()> {
    let mut c_layout = false;
    for attr in input
        .attrs
        .iter()
        .filter(|attr| attr.path().is_ident("repr"))
    {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("C") || meta.path.is_ident("transparent") {
                c_layout = true;
            }
            // `align(N)` and `packed(N)` carry an argument, which is not needed here.
            if meta.input.peek(syn::token::Paren) {
                let content;
                syn::parenthesized!(content in meta.input);
                content.parse::<TokenStream>()?;
            }
            Ok(())
        })?;
    }
    if c_layout {
        return Ok(());
    }
    Err(Error::new(
        input.ident.span(),
        format!(
            "#[derive(DeviceRepr)] needs #[repr(C)] (or #[repr(transparent)]) on `{}`: without \
             it Rust may reorder the fields, and the kernel would read them at other offsets",
            input.ident
        ),
    ))
}

/// What the `#[cudyn(...)]` attributes say.
struct Attributes {
    /// The path of the cudyn crate: `::cudyn` unless `crate = "..."` says otherwise.
    cudyn: Path,
    /// The C type the struct stands for, from `c_name = "..."`.
    c_name: Option<syn::LitStr>,
    /// `padded`: the struct may have padding, which `Pack` zeroes.
    padded: bool,
}

fn attributes(input: &DeriveInput) -> syn::Result<Attributes> {
    let mut path = syn::parse_quote!(::cudyn);
    let mut c_name = None;
    let mut padded = false;
    for attr in input
        .attrs
        .iter()
        .filter(|attr| attr.path().is_ident("cudyn"))
    {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                path = meta.value()?.parse::<syn::LitStr>()?.parse()?;
                Ok(())
            } else if meta.path.is_ident("padded") {
                padded = true;
                Ok(())
            } else if meta.path.is_ident("c_name") {
                let name: syn::LitStr = meta.value()?.parse()?;
                if name.value().trim().is_empty() {
                    return Err(meta.error("`c_name` names the C type: it cannot be empty"));
                }
                c_name = Some(name);
                Ok(())
            } else {
                Err(meta.error(
                    "unknown cudyn attribute: the known ones are `crate = \"path\"`, \
                     `c_name = \"CType\"` and `padded`",
                ))
            }
        })?;
    }
    Ok(Attributes {
        cudyn: path,
        c_name,
        padded,
    })
}
