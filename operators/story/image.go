package story

import (
	"crypto/sha256"
	"encoding/hex"
)

// Lead images. A story shows the image of its representative article, or,
// when that has none, the first image among its articles in arrival
// order. Readers never load an image from its outlet: stories and article
// records carry Image, the path of the image on the node's proxy,
// ImagePathPrefix followed by ImageID of the image URL. The proxy serves
// only ids the story state knows (Operator.ImageURL), so it cannot be used
// to fetch arbitrary URLs.

// ImagePathPrefix is the path of the node's image proxy; an image's path
// is the prefix followed by its ImageID.
const ImagePathPrefix = "/api/v1/image/"

// ImageIDLen is the length of an ImageID.
const ImageIDLen = 32

// ImageID returns the id of an image URL: the first 16 bytes of its
// SHA-256 in lower-case hex.
func ImageID(imageURL string) string {
	sum := sha256.Sum256([]byte(imageURL))
	return hex.EncodeToString(sum[:ImageIDLen/2])
}

// ImagePath returns the proxy path of an image URL, or "" for none.
func ImagePath(imageURL string) string {
	if imageURL == "" {
		return ""
	}
	return ImagePathPrefix + ImageID(imageURL)
}

// ValidImageID reports whether id has the form of an ImageID.
func ValidImageID(id string) bool {
	if len(id) != ImageIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// setImage recomputes the story's Image from its representative's image
// and its first image.
func (st *Story) setImage() {
	img := st.repImage
	if img == "" {
		img = st.firstImage
	}
	st.Image = ImagePath(img)
}

// noteImage records an article's image as the story's first image when it
// has none yet or the article came earlier (lower number).
func (st *Story) noteImage(imageURL string, num uint64) {
	if imageURL != "" && (st.firstImage == "" || num < st.firstImageNum) {
		st.firstImage, st.firstImageNum = imageURL, num
	}
}
