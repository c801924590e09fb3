package media

import (
	"encoding/binary"
	"image"
	"image/draw"
)

// jpegOrientation reads the EXIF orientation (1 to 8) of a JPEG from its
// APP1 segment, or 1 when it has none. Phones store most photos sideways
// with orientation 6 or 8 and leave the turning to whoever shows them; a
// scaled copy carries no EXIF, so the turn must be made in its pixels.
func jpegOrientation(data []byte) int {
	for i := 2; i+4 <= len(data) && data[i] == 0xff; {
		m, n := data[i+1], int(binary.BigEndian.Uint16(data[i+2:]))
		if m == 0xda || m == 0xd9 || n < 2 || i+2+n > len(data) {
			break
		}
		if seg := data[i+4 : i+2+n]; m == 0xe1 && len(seg) > 6 && string(seg[:6]) == "Exif\x00\x00" {
			if o := tiffOrientation(seg[6:]); o != 0 {
				return o
			}
		}
		i += 2 + n
	}
	return 1
}

// tiffOrientation finds tag 0x0112 (a SHORT) in the first IFD of a TIFF
// header, or 0.
func tiffOrientation(t []byte) int {
	if len(t) < 8 {
		return 0
	}
	var bo binary.ByteOrder
	switch string(t[:2]) {
	case "II":
		bo = binary.LittleEndian
	case "MM":
		bo = binary.BigEndian
	default:
		return 0
	}
	ifd := int64(bo.Uint32(t[4:]))
	if ifd+2 > int64(len(t)) {
		return 0
	}
	count := int64(bo.Uint16(t[ifd:]))
	for e := ifd + 2; e+12 <= int64(len(t)) && count > 0; e, count = e+12, count-1 {
		if bo.Uint16(t[e:]) == 0x0112 && bo.Uint16(t[e+2:]) == 3 {
			if o := int(bo.Uint16(t[e+8:])); o >= 1 && o <= 8 {
				return o
			}
			return 0
		}
	}
	return 0
}

// orient turns and mirrors img as EXIF orientation o says it should be
// shown (1 leaves it as it is; 5 to 8 swap its sides).
func orient(img image.Image, o int) image.Image {
	if o <= 1 || o > 8 {
		return img
	}
	src, ok := img.(*image.RGBA)
	if !ok || src.Rect.Min != (image.Point{}) {
		src = image.NewRGBA(image.Rect(0, 0, img.Bounds().Dx(), img.Bounds().Dy()))
		draw.Draw(src, src.Rect, img, img.Bounds().Min, draw.Src)
	}
	w, h := src.Rect.Dx(), src.Rect.Dy()
	dw, dh := w, h
	if o >= 5 {
		dw, dh = h, w
	}
	dst := image.NewRGBA(image.Rect(0, 0, dw, dh))
	for y := range dh {
		for x := range dw {
			// (sx, sy) is the source pixel shown at (x, y).
			var sx, sy int
			switch o {
			case 2:
				sx, sy = w-1-x, y
			case 3:
				sx, sy = w-1-x, h-1-y
			case 4:
				sx, sy = x, h-1-y
			case 5:
				sx, sy = y, x
			case 6:
				sx, sy = y, h-1-x
			case 7:
				sx, sy = w-1-y, h-1-x
			case 8:
				sx, sy = w-1-y, x
			}
			copy(dst.Pix[dst.PixOffset(x, y):][:4], src.Pix[src.PixOffset(sx, sy):][:4])
		}
	}
	return dst
}
