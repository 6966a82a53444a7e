// Package sse is Terrace's encryption at rest: the authenticated,
// seekable stream format object bytes are encrypted in, the sealing of
// per-object data keys under a cluster master key (SSE-S3) or a key the
// client supplies with every request (SSE-C), and the master keyring.
//
// # Stream format (version 1)
//
// An encrypted stream is a 32-byte header followed by packages, in the
// style of MinIO's DARE: the plaintext is cut into packages of PackageSize
// (64 KiB) bytes, the last one shorter, and each package is sealed on its
// own with AES-256-GCM, so a ranged read decrypts only the packages it
// covers.
//
//	header   "TSE" 0x01 | 28 random salt bytes
//	package  AES-256-GCM(streamKey, nonce_i, plaintext_i)   (len_i + 16 bytes)
//	streamKey = HMAC-SHA256(dataKey, "terrace-sse v1 stream" | salt)
//	nonce_i   = uint64 big-endian i | uint32 big-endian final (1 on the last package)
//
// The random salt gives every stream its own key, so a data key may encrypt
// many streams (every part of a multipart object, a part uploaded twice)
// without ever reusing a (key, nonce) pair. The package index in the nonce
// stops packages from being reordered; the final flag stops a stream from
// being truncated at a package boundary or extended. An empty plaintext is
// one empty final package, so even it is authenticated. The ciphertext
// size is a function of the plaintext size alone (CipherSize, PlainSize):
// nothing about sizes needs to be stored.
//
// A multipart object is the concatenation of one stream per part; Plan maps
// a plaintext range of such an object onto the streams it touches.
//
// # Keys
//
// Every object gets a fresh random 32-byte data key. SSE-S3 seals it with
// the active master key of the Keyring (AES-256-GCM, the key's ID stored
// beside the sealed bytes so that older keys still open what they sealed
// after a rotation). SSE-C seals it with a key-encryption key derived from
// the customer's key (CustomerKEK); the customer's key itself is never
// stored, only what AWS also returns: its MD5. The same sealing protects
// other secrets with a purpose string as associated data, so a sealed blob
// can only be opened for the purpose it was sealed for.
//
// # What it owns and must not touch
//
// It owns the format, the key derivations and the keyring file format. It
// does no I/O except reading and creating keyring files, knows nothing of
// S3 requests (package s3 parses the headers) or of metadata, and never
// logs key material.
//
// Only the standard library is used (crypto/aes, crypto/cipher,
// crypto/hmac, crypto/sha256).
package sse
